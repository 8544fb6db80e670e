"""The share-group state handlers (APIs 83-87): per-partition answers from the share coordinator,
the checks before it (authorization, group id, topic id), the uninitialized summary, and
FindCoordinator's SHARE key type. A fake coordinator; no broker."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.delete_share_group_state.v0 import request as delete_v0
from kio.schema.find_coordinator.v6 import request as find_v6
from kio.schema.read_share_group_state.v0 import request as read_v0
from kio.schema.read_share_group_state_summary.v1 import request as summary_v1
from kio.schema.write_share_group_state.v1 import request as write_v1

from odradek.coordinator.share.shard import ShareSummary
from odradek.errors import ErrorCode
from odradek.server.apis import (
    delete_share_group_state,
    find_coordinator,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from odradek.share.state import DeliveryState, SharePartitionKey, ShareState, ShareStateError, StateBatch

from .api_fakes import FakeServices, call

TOPIC = uuid.UUID(int=9)


@dataclass
class FakeShareCoordinator:
    states: dict[SharePartitionKey, ShareState] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState:
        self.calls.append(("read", key))
        if key.partition == 1:
            raise ShareStateError(ErrorCode.not_coordinator)
        return self.states[key]

    async def write_state(self, key: SharePartitionKey, *args: Any) -> None:
        self.calls.append(("write", (key, *args)))
        if key.partition == 1:
            raise ShareStateError(ErrorCode.fenced_state_epoch, "state epoch 0 is below the recorded 2")

    async def delete_state(self, key: SharePartitionKey) -> None:
        self.calls.append(("delete", key))

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareSummary | None:
        return ShareSummary(3, 4, 5, 6) if key.partition == 0 else None

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        return ErrorCode.none, 1


@dataclass
class Services(FakeServices):
    share_coordinator: FakeShareCoordinator = field(default_factory=FakeShareCoordinator)


def test_read_answers_each_partition_with_its_own_error() -> None:
    services = Services()
    key = SharePartitionKey("g", TOPIC, 0)
    services.share_coordinator.states[key] = ShareState(2, 10, 1, (StateBatch(10, 12, DeliveryState.ARCHIVED, 5),))
    request = read_v0.ReadShareGroupStateRequest(
        group_id="g",
        topics=(
            read_v0.ReadStateData(
                topic_id=TOPIC,
                partitions=(
                    read_v0.PartitionData(partition=0, leader_epoch=1),
                    read_v0.PartitionData(partition=1, leader_epoch=1),
                ),
            ),
            read_v0.ReadStateData(topic_id=None, partitions=(read_v0.PartitionData(partition=0, leader_epoch=1),)),
        ),
    )
    response = call(read_share_group_state, services, 0, request)
    first, second = response.results[0].partitions
    assert (first.error_code, first.state_epoch, first.start_offset) == (ErrorCode.none, 2, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in first.state_batches] == [
        (10, 12, 4, 5)
    ]
    assert second.error_code == ErrorCode.not_coordinator
    (null_topic,) = response.results[1].partitions
    assert (null_topic.error_code, null_topic.error_message) == (
        ErrorCode.invalid_request,
        "The topic id cannot be null.",
    )


def test_write_passes_the_batches_and_the_delivery_complete_count() -> None:
    services = Services()
    batch = write_v1.StateBatch(first_offset=3, last_offset=4, delivery_state=2, delivery_count=1)
    bad = write_v1.StateBatch(first_offset=5, last_offset=5, delivery_state=3, delivery_count=1)

    def partition(index: int, *batches: write_v1.StateBatch) -> write_v1.PartitionData:
        return write_v1.PartitionData(
            partition=index,
            state_epoch=0,
            leader_epoch=7,
            start_offset=3,
            delivery_complete_count=2,
            state_batches=batches,
        )

    request = write_v1.WriteShareGroupStateRequest(
        group_id="g",
        topics=(
            write_v1.WriteStateData(topic_id=TOPIC, partitions=(partition(0, batch), partition(1), partition(2, bad))),
        ),
    )
    response = call(write_share_group_state, services, 1, request)
    errors = [(p.error_code, p.error_message) for p in response.results[0].partitions]
    assert errors[:2] == [
        (ErrorCode.none, None),
        (ErrorCode.fenced_state_epoch, "state epoch 0 is below the recorded 2"),
    ]
    assert errors[2][0] == ErrorCode.invalid_request  # DeliveryState 3 is not Kafka's
    key = SharePartitionKey("g", TOPIC, 0)
    assert services.share_coordinator.calls[0] == (
        "write",
        (key, 0, 7, 3, [StateBatch(3, 4, DeliveryState.ACKNOWLEDGED, 1)], 2),
    )


def test_summary_of_an_uninitialized_share_partition_and_an_empty_group_id() -> None:
    services = Services()
    parts = (
        summary_v1.PartitionData(partition=0, leader_epoch=0),
        summary_v1.PartitionData(partition=1, leader_epoch=0),
    )
    request = summary_v1.ReadShareGroupStateSummaryRequest(
        group_id="g", topics=(summary_v1.ReadStateSummaryData(topic_id=TOPIC, partitions=parts),)
    )
    known, unknown = call(read_share_group_state_summary, services, 1, request).results[0].partitions
    assert (known.state_epoch, known.leader_epoch, known.start_offset, known.delivery_complete_count) == (3, 4, 5, 6)
    assert (unknown.error_code, unknown.state_epoch, unknown.leader_epoch, unknown.start_offset) == (
        ErrorCode.none, 0, -1, -1
    )  # fmt: skip
    delete = delete_v0.DeleteShareGroupStateRequest(
        group_id="",
        topics=(delete_v0.DeleteStateData(topic_id=TOPIC, partitions=(delete_v0.PartitionData(partition=0),)),),
    )
    (refused,) = call(delete_share_group_state, services, 0, delete).results[0].partitions
    assert refused.error_code == ErrorCode.invalid_group_id
    assert services.share_coordinator.calls == []


def test_find_coordinator_answers_share_keys_and_refuses_malformed_ones() -> None:
    request = find_v6.FindCoordinatorRequest(key_type=2, coordinator_keys=("g:AAAAAAAAAAAAAAAAAAAACQ:0", "g:bad:0"))
    found, malformed = call(find_coordinator, Services(), 6, request).coordinators
    assert (found.error_code, found.node_id, found.host, found.port) == (ErrorCode.none, 1, "broker-1", 9092)
    assert (malformed.error_code, malformed.node_id) == (ErrorCode.invalid_request, -1)
