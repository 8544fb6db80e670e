"""``offsets.storage=kafka`` for the ZooKeeper consumer: the group's offsets in ``__consumer_offsets``
through its coordinator (OffsetCommit as an admin, generation -1; OffsetFetch), as Kafka 0.8.2's
consumer committed them once it moved off ZooKeeper. Belongs to the cluster's event loop."""

from __future__ import annotations

from odradek.client.cluster import Cluster, TopicPartition
from odradek.client.errors import error_for
from odradek.client.group_offsets import GroupOffsetsClient
from odradek.errors import ErrorCode

__all__ = ["KafkaOffsetStorage"]


class KafkaOffsetStorage:
    def __init__(self, cluster: Cluster, group_id: str) -> None:
        self.client = GroupOffsetsClient(cluster)
        self.group_id = group_id

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Raises the first partition error answered."""
        for tp, code in (await self.client.commit(self.group_id, offsets)).items():
            if code != ErrorCode.none:
                raise error_for(code, None, f"{tp.topic}-{tp.partition}")

    async def fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        committed = await self.client.committed(self.group_id)
        return {tp: offset for tp, offset in committed.items() if tp in partitions}
