"""Shared test helpers. Broker fixtures come from the ``odradek.testing`` pytest plugin.

How the suite runs in parallel (``make test`` runs ``pytest -n N``; see docs/development.md): the
tests are dealt to pytest-xdist workers in groups (:func:`group_of`), one test module a group, so
a module's module-scoped brokers, clusters and ZooKeeper chroots start once, on one worker, and its
tests run in their order; the Spark modules that use the session-wide local Spark session share a
group, so one worker starts Spark. Groups are handed out longest first (:func:`_group_rank`).
"""

from __future__ import annotations

import gc
import logging
import os

import pytest

SPARK_SESSION_GROUP = "spark-local"
"""The group of the Spark modules that use the ``spark`` fixture (one local session per worker)."""

LONG_MODULES = (
    "tests/spark/test_spark_cluster.py",
    "tests/integration/test_failover_loop.py",
    "tests/chaos/test_chaos_campaign.py",
)
"""Modules of a minute or more, handed out first (in this order), after the Spark group."""

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
logging.getLogger("kafka").setLevel(logging.WARNING)
logging.getLogger("aiokafka").setLevel(logging.WARNING)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Collect unreferenced librdkafka clients now: destroyed after the run's summary, they log
    connection failures to brokers the tests already stopped."""
    gc.collect()


def group_of(nodeid: str) -> str:
    """The group a test runs in: its module, or :data:`SPARK_SESSION_GROUP` for the Spark modules
    other than the :data:`LONG_MODULES` (which start Spark clusters of their own)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/spark/") and path not in LONG_MODULES:
        return SPARK_SESSION_GROUP
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Deal whole groups (:func:`group_of`) to the workers, in collection order (which
    :func:`pytest_collection_modifyitems` sets), each to one worker."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def _group_rank(item: pytest.Item, group: str) -> tuple[int, int]:
    """Order of the groups: the local Spark session's, the :data:`LONG_MODULES`, the other slow
    or ZooKeeper modules, the other integration modules, then the process-free unit tests. Without
    ``-n`` only this order applies."""
    path = item.nodeid.split("::", 1)[0]
    if group == SPARK_SESSION_GROUP:
        return 0, 0
    if path in LONG_MODULES:
        return 1, LONG_MODULES.index(path)
    if item.get_closest_marker("slow") or item.get_closest_marker("zookeeper"):
        return 2, 0
    if path.startswith("tests/unit/"):
        return 4, 0
    return 3, 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the groups: longest first (:func:`_group_rank`), each group's tests in their order."""
    groups = {item.nodeid: group_of(item.nodeid) for item in items}
    ranks: dict[str, tuple[int, int]] = {}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        group = groups[item.nodeid]
        ranks[group] = min(ranks.get(group, (9, 0)), _group_rank(item, group))
        first_seen.setdefault(group, index)
    items.sort(key=lambda item: (ranks[groups[item.nodeid]], first_seen[groups[item.nodeid]]))
