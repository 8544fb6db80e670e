"""``/health/ready``'s answer from the broker's state: each failed condition is the reason."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from odradek.errors import InvalidConfigError
from odradek.metrics.exposition import generate_text
from odradek.server.broker_metrics import BrokerMetrics


class Store:
    def __init__(self, owner: int | None, session_id: int = 7, fail: bool = False) -> None:
        self.owner = owner
        self.session_id = session_id
        self.fail = fail
        self.asked: list[str] = []

    async def exists(self, path: str) -> Any:
        self.asked.append(path)
        if self.fail:
            raise ConnectionError("connection lost")
        return None if self.owner is None else SimpleNamespace(ephemeral_owner=self.owner)


def _broker(store: Store | None, listener: str | None = None) -> Any:
    return SimpleNamespace(
        config={"metrics.listener": listener},
        socket_server=SimpleNamespace(request_observer=None),
        broker_id=3,
        serving=asyncio.Event(),
        log_manager=SimpleNamespace(offline_dirs=set()),
        store=store,
    )


def _ready(broker: Any, serving: bool = True, stopping: bool = False) -> str | None:
    async def run() -> str | None:
        metrics = BrokerMetrics(cast(Any, broker))
        if serving:
            broker.serving.set()
        metrics.stopping = stopping
        return await metrics.readiness()

    return asyncio.run(run())


def test_ready_when_registered_by_this_session() -> None:
    store = Store(owner=7)
    assert _ready(_broker(store)) is None
    assert store.asked == ["/brokers/ids/3"]


def test_each_condition_is_a_reason() -> None:
    assert _ready(_broker(Store(owner=7)), serving=False) == "starting up"
    assert _ready(_broker(Store(owner=7)), stopping=True) == "shutting down"
    assert _ready(_broker(Store(owner=None))) == "not registered in /brokers/ids/3"
    assert _ready(_broker(Store(owner=99))) == "/brokers/ids/3 belongs to another session"
    assert _ready(_broker(None)) == "no metadata store session"
    reason = _ready(_broker(Store(owner=7, fail=True)))
    assert reason is not None and reason.startswith("cannot read the broker registration: connection lost")
    broker = _broker(Store(owner=7))
    broker.log_manager.offline_dirs = {Path("/data/b"), Path("/data/a")}
    assert _ready(broker) == "log dirs offline: /data/a, /data/b"


def test_without_a_listener_nothing_is_counted_and_a_bad_listener_is_refused() -> None:
    broker = _broker(Store(owner=7))
    metrics = BrokerMetrics(cast(Any, broker))
    assert metrics.topic_stats is None and metrics.request_metrics is None
    assert broker.socket_server.request_observer is None
    counted = BrokerMetrics(cast(Any, _broker(Store(owner=7), "http://127.0.0.1:0")))
    assert counted.topic_stats is not None and counted.address == ("127.0.0.1", 0)
    with pytest.raises(InvalidConfigError):
        BrokerMetrics(cast(Any, _broker(Store(owner=7), "tcp://127.0.0.1:9404")))


@dataclass
class Cleaner:
    max_dirty_percent: float
    time_since_last_run_ms: float = 10.0
    uncleanable_partitions_count: int = 0


def test_a_registered_cleaner_is_exported_and_a_second_one_replaces_it() -> None:
    metrics = BrokerMetrics(cast(Any, _broker(Store(owner=7), "http://127.0.0.1:0")))
    metrics.register_cleaner(Cleaner(12.5))
    metrics.register_cleaner(Cleaner(40.0))
    text = generate_text(metrics.registry).decode()
    assert "kafka_log_logcleaner_max_dirty_percent 40.0\n" in text
    assert text.count("# TYPE kafka_log_logcleaner_max_dirty_percent gauge") == 1
