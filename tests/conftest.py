"""Shared test helpers. Broker fixtures come from the ``odradek.testing`` pytest plugin.

How the suite runs in parallel (``make test`` runs ``pytest -n N --dist loadgroup``; see
docs/development.md): every test module is one pytest-xdist group, so a module's module-scoped
brokers, clusters and ZooKeeper chroots start once, on one worker; the Spark modules that use the
session-wide local Spark session share a group, so one worker starts Spark. Groups are handed to
workers longest first (:func:`_group_rank`), so the long modules do not start last.
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


def _group_rank(item: pytest.Item, group: str) -> tuple[int, int]:
    """Order of the groups: the local Spark session's, the :data:`LONG_MODULES`, the other slow
    or ZooKeeper modules, the other integration modules, then the process-free unit tests."""
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
    """Put every test in its module's xdist group (see the module docstring) and order the groups.

    Runs before pytest-xdist reads the ``xdist_group`` marks; without ``-n`` the marks are inert
    and only the order changes. A test that already names a group keeps it.
    """
    ranks: dict[str, tuple[int, int]] = {}
    groups: dict[str, str] = {}
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        if marker is None:
            path = item.nodeid.split("::", 1)[0]
            uses_spark = "spark" in getattr(item, "fixturenames", ())
            group = SPARK_SESSION_GROUP if path.startswith("tests/spark/") and uses_spark else path
            item.add_marker(pytest.mark.xdist_group(group))
        else:
            group = str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
        groups[item.nodeid] = group
        ranks[group] = min(ranks.get(group, (9, 0)), _group_rank(item, group))
    first_seen = {}
    for index, item in enumerate(items):
        first_seen.setdefault(groups[item.nodeid], index)
    items.sort(key=lambda item: (ranks[groups[item.nodeid]], first_seen[groups[item.nodeid]]))
