"""What the controller's mixins (operations, reassignment) use of :class:`KafkaController`.

The mixins run on the controller's event task and change partitions only through these members:
``_rewrite_state`` (fresh read of the state znode, leader epoch + 1, conditional write), then
LeaderAndIsr to the replicas and UpdateMetadata to every broker. Declared here once so each mixin
type-checks on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.controller.events import ControllerContext, ControllerEvent
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.controller.channel import ControllerChannelManager
    from odradek.metadata.kafka_zk_client import KafkaZkClient


class ControllerCore:
    broker_id: int
    active: bool
    ctx: ControllerContext
    zk: KafkaZkClient
    channel: ControllerChannelManager

    def put(self, event: ControllerEvent, payload: object = None) -> None:
        raise NotImplementedError

    async def _rewrite_state(
        self,
        tp: TopicPartition,
        replicas: list[int],
        decide: Callable[[PartitionState], tuple[int, list[int]] | None],
    ) -> PartitionState | None:
        raise NotImplementedError

    async def _send_leader_and_isr(
        self, states: dict[TopicPartition, PartitionState], only: set[int] | None = None
    ) -> None:
        raise NotImplementedError

    async def _send_update_metadata(
        self, states: dict[TopicPartition, PartitionState], deleted: set[str] | None = None
    ) -> None:
        raise NotImplementedError
