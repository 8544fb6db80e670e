"""Reads and deletes of a ZooKeeper consumer group's znodes (SEEDS §1): ``/consumers/<g>/ids/<id>``
(registered consumers) and ``/consumers/<g>/owners/<t>/<p>`` (``<consumer id>-<thread>``). A
missing znode reads as empty or None; deleting a missing one is not an error. Shared by the
consumer connector and ``odradek consumer-groups --zookeeper``; the offsets znodes are
:class:`~odradek.metadata.kafka_zk_client.KafkaZkClient`'s (the broker reads them too).
"""

from __future__ import annotations

from odradek.client.cluster import TopicPartition
from odradek.metadata.errors import NoNodeError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.znodes import ConsumerOwnerZNode

__all__ = ["children", "consumer_ids", "delete_owner", "owner"]


async def children(zk: KafkaZkClient, path: str) -> list[str]:
    """The sorted children of ``path``; [] when it does not exist."""
    try:
        return sorted(await zk.store.get_children(path))
    except NoNodeError:
        return []


async def consumer_ids(zk: KafkaZkClient, group: str) -> list[str]:
    """The consumers registered in ``group``, sorted."""
    return await children(zk, f"/consumers/{group}/ids")


async def owner(zk: KafkaZkClient, group: str, tp: TopicPartition) -> str | None:
    """The thread id owning ``tp`` in ``group``, or None."""
    try:
        data, _ = await zk.store.get(ConsumerOwnerZNode.path(group, tp.topic, tp.partition))
    except NoNodeError:
        return None
    return data.decode(errors="replace")


async def delete_owner(zk: KafkaZkClient, group: str, tp: TopicPartition) -> None:
    try:
        await zk.store.delete(ConsumerOwnerZNode.path(group, tp.topic, tp.partition))
    except NoNodeError:
        pass
