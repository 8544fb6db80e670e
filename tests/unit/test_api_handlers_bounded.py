"""Handlers whose work grows with a request's numbers, on fakes of their services: repeated names
are answered once, and waits run together rather than one after another."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.describe_groups.v5 import request as describe_v5

from odradek.client import write_txn_markers as markers_message
from odradek.errors import ErrorCode
from odradek.server.apis import describe_groups, write_txn_markers
from odradek.storage import TopicPartition

from .api_fakes import FakeReplicaManager, FakeServices, call


def test_describe_groups_describes_a_group_named_many_times_once() -> None:
    services = FakeServices()
    request = describe_v5.DescribeGroupsRequest(groups=("g",) * 3000 + ("h",), include_authorized_operations=True)
    response = call(describe_groups, services, 5, request)
    assert [(g.group_id, g.group_state, len(g.members)) for g in response.groups] == [
        ("g", "Stable", 1),
        ("h", "Stable", 1),
    ]
    assert [c for c in services.group_coordinator.calls if c[0] == "describe"] == [("describe", "g"), ("describe", "h")]


@dataclass
class _MarkerReplicaManager(FakeReplicaManager):
    """Leads every partition; each append is offset 0 and no ISR ever catches up: each wait times
    out after the timeout it is given."""

    appended: list[TopicPartition] = field(default_factory=list)

    def leader_partition(self, tp: TopicPartition) -> Any:
        return SimpleNamespace(producer_state=SimpleNamespace(producers={}))

    def append_records(self, tp: TopicPartition, records: bytes, acks: int, origin: str) -> Any:
        self.appended.append(tp)
        return SimpleNamespace(last_offset=0)

    async def wait_for_acks(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> ErrorCode:
        await asyncio.sleep(timeout_ms / 1000)
        return ErrorCode.request_timed_out


def test_write_txn_markers_appends_every_marker_then_waits_for_them_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(write_txn_markers, "MARKER_TIMEOUT_MS", 200)
    services = FakeServices(replica_manager=_MarkerReplicaManager())
    partitions = [TopicPartition("t", i) for i in range(20)]
    request = markers_message.encode(
        [
            markers_message.TxnMarkerEntry(7, 1, 3, True, tuple(partitions[:10])),
            markers_message.TxnMarkerEntry(8, 1, 3, False, tuple(partitions[10:])),
        ]
    )
    started = time.monotonic()
    response = call(write_txn_markers, services, 1, request)
    took = time.monotonic() - started
    assert services.replica_manager.appended == partitions
    answered = markers_message.decode_response(response)
    assert answered == [
        [(tp, ErrorCode.request_timed_out) for tp in partitions[:10]],
        [(tp, ErrorCode.request_timed_out) for tp in partitions[10:]],
    ]
    assert took < 2.0, f"20 timed-out waits took {took:.1f} s: they ran one after another"
