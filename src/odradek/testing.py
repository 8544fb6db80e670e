"""Pytest plugin and helpers to run real odradek brokers in tests.

Registered as a pytest plugin (entry point ``pytest11: odradek``), so any project that installs
odradek gets the fixtures:

- ``odradek_broker``: a fresh single broker on a free 127.0.0.1 port with a temporary data dir,
  function-scoped; yields a :class:`BrokerRunner` (``.bootstrap_servers`` is ``"127.0.0.1:PORT"``).
- ``odradek_broker_factory``: a callable ``factory(data_dir=None, overrides={...}) -> BrokerRunner``
  for tests that need particular settings; everything it started is stopped at the end of the test.

Both yield :class:`odradek.server.runner.BrokerRunner` (a broker on its own thread and event loop;
see that module). Test brokers start with :data:`TEST_DEFAULTS`: a free port, no initial
rebalance delay, and internal topics with replication factor 1 and 5 partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from odradek.server.runner import TEST_DEFAULTS, BrokerRunner

__all__ = ["TEST_DEFAULTS", "BrokerRunner", "odradek_broker", "odradek_broker_factory"]


@pytest.fixture
def odradek_broker(tmp_path: Any) -> Iterator[BrokerRunner]:
    """A single broker on a free port with a temporary data dir."""
    runner = BrokerRunner(str(tmp_path / "broker")).start()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture
def odradek_broker_factory(tmp_path: Any) -> Iterator[Callable[..., BrokerRunner]]:
    """``factory(data_dir=None, overrides={"num.partitions": "3"})``: start brokers with given settings."""
    started: list[BrokerRunner] = []
    counter = [0]

    def factory(data_dir: str | None = None, overrides: Mapping[str, str] | None = None) -> BrokerRunner:
        counter[0] += 1
        d = data_dir or str(tmp_path / f"broker-{counter[0]}")
        runner = BrokerRunner(d, overrides).start()
        started.append(runner)
        return runner

    try:
        yield factory
    finally:
        for runner in started:
            runner.stop()
