"""A share consumer's requests on the wire, for tests that need exact control of share sessions,
acknowledgements and the answers' fields (ShareFetch v2, ShareAcknowledge v2)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.records import iter_batches

Ack = tuple[int, int, Sequence[int]]


async def topic_id(conn: KafkaConnection, topic: str) -> uuid.UUID:
    metadata = RequestBuilder(ApiKey.METADATA, 12)
    request = metadata(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    meta = await conn.send(request)
    [tid] = [t.topic_id for t in meta.topics if t.name == topic]
    return tid


def _ack_batches(rb: RequestBuilder, acks: Sequence[Ack]) -> tuple[Any, ...]:
    return tuple(
        rb.make("AcknowledgementBatch", first_offset=f, last_offset=last, acknowledge_types=tuple(types))
        for f, last, types in acks
    )


async def share_fetch(
    conn: KafkaConnection,
    group: str,
    member: str,
    epoch: int,
    tid: uuid.UUID,
    partitions: Sequence[int] = (0,),
    *,
    acks: dict[int, Sequence[Ack]] | None = None,
    max_wait_ms: int = 0,
    max_records: int = 500,
    acquire_mode: int = 0,
    forget: Sequence[int] = (),
) -> Any:
    rb = RequestBuilder(ApiKey.SHARE_FETCH, 2)
    acks = acks or {}
    parts = tuple(
        rb.make("FetchPartition", partition_index=p, acknowledgement_batches=_ack_batches(rb, acks.get(p, ())))
        for p in sorted(set(partitions) | set(acks))
    )
    return await conn.send(
        rb(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            share_acquire_mode=acquire_mode,
            is_renew_ack=False,
            topics=(rb.make("FetchTopic", topic_id=tid, partitions=parts),) if parts else (),
            forgotten_topics_data=(rb.make("ForgottenTopic", topic_id=tid, partitions=tuple(forget)),)
            if forget
            else (),
        )
    )


async def share_acknowledge(
    conn: KafkaConnection, group: str, member: str, epoch: int, tid: uuid.UUID, acks: dict[int, Sequence[Ack]]
) -> Any:
    rb = RequestBuilder(ApiKey.SHARE_ACKNOWLEDGE, 2)
    parts = tuple(
        rb.make("AcknowledgePartition", partition_index=p, acknowledgement_batches=_ack_batches(rb, a))
        for p, a in sorted(acks.items())
    )
    return await conn.send(
        rb(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            is_renew_ack=False,
            topics=(rb.make("AcknowledgeTopic", topic_id=tid, partitions=parts),),
        )
    )


def partitions(answer: Any) -> dict[int, Any]:
    """The answer's partitions by index (one topic)."""
    return {int(p.partition_index): p for t in answer.responses for p in t.partitions}


def acquired_offsets(part: Any) -> dict[int, int]:
    """offset -> delivery count of every record the partition answer acquired and carries."""
    present: set[int] = set()
    for _, h in iter_batches(bytes(part.records or b"")):
        present.update(range(h.base_offset, h.last_offset + 1))
    out: dict[int, int] = {}
    for a in part.acquired_records:
        for o in range(int(a.first_offset), int(a.last_offset) + 1):
            assert o in present, f"acquired offset {o} has no record in the answer"
            out[o] = int(a.delivery_count)
    return out
