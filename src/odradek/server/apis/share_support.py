"""What ShareFetch and ShareAcknowledge share: resolving the request's partitions (by topic id),
authorizing them, parsing acknowledgement batches, the share session's epoch rules
(:mod:`odradek.share.share_session`) and building per-partition answers with leader hints.

Authorization as Kafka's ``KafkaApis``: READ on the group (else the whole request is
GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its
partitions). A topic id this broker does not know is UNKNOWN_TOPIC_ID for its partitions.

Event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.errors import ErrorCode
from odradek.server.apis.leader_hints import HINTED_ERRORS, current_leader, node_endpoints
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.share.share_session import ShareTopicPartition
from odradek.share.state import AcknowledgeType
from odradek.storage import TopicPartition

AckBatches = list[tuple[int, int, list[AcknowledgeType]]]
#: The most acknowledgement batches one partition of one request may carry.
MAX_ACK_BATCHES = 10_000


@dataclass(slots=True)
class ResolvedPartitions:
    """A request's partitions: ``ok`` resolved and authorized (in request order); ``failed`` the
    others with their error, keyed by (topic id, partition); ``acks`` by resolved partition."""

    ok: list[ShareTopicPartition] = field(default_factory=list)
    failed: dict[tuple[uuid.UUID, int], ErrorCode] = field(default_factory=dict)
    acks: dict[ShareTopicPartition, AckBatches] = field(default_factory=dict)
    bad_acks: dict[ShareTopicPartition, ErrorCode] = field(default_factory=dict)


def resolve(ctx: RequestContext, topics: Sequence[Any]) -> ResolvedPartitions:
    """Resolve ``topics`` (entries with ``topic_id`` and ``partitions``, each partition with
    ``partition_index`` and, where the request has them, ``acknowledgement_batches``)."""
    names = ctx.services.metadata_cache.topic_names
    out = ResolvedPartitions()
    known = {t.topic_id: names.get(t.topic_id) for t in topics if t.topic_id is not None}
    readable = set(
        filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, sorted({n for n in known.values() if n}))
    )
    for t in topics:
        topic_id = t.topic_id or uuid.UUID(int=0)
        name = known.get(t.topic_id)
        for p in t.partitions:
            index = int(p.partition_index)
            if name is None:
                out.failed[(topic_id, index)] = ErrorCode.unknown_topic_id
                continue
            if name not in readable:
                out.failed[(topic_id, index)] = ErrorCode.topic_authorization_failed
                continue
            stp = ShareTopicPartition(topic_id, name, index)
            if stp not in out.acks and stp not in out.ok:
                out.ok.append(stp)
            batches = getattr(p, "acknowledgement_batches", ())
            if batches:
                parsed = parse_acks(batches)
                if parsed is None:
                    out.bad_acks[stp] = ErrorCode.invalid_request
                else:
                    out.acks.setdefault(stp, []).extend(parsed)
    return out


def parse_acks(batches: Sequence[Any]) -> AckBatches | None:
    """The acknowledgement batches as (first, last, types); None when malformed: too many, a
    range backwards or longer than its types say, an unknown type."""
    if len(batches) > MAX_ACK_BATCHES:
        return None
    out: AckBatches = []
    for b in batches:
        first, last = int(b.first_offset), int(b.last_offset)
        types = [int(t) for t in b.acknowledge_types]
        if first < 0 or last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return None
        try:
            out.append((first, last, [AcknowledgeType(t) for t in types]))
        except ValueError:
            return None
    return out


def partition_answers(
    ctx: RequestContext,
    entity: str,
    answers: Iterable[tuple[uuid.UUID, int, dict[str, Any]]],
    topic_entity: str,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(responses, node_endpoints): ``answers`` grouped by topic id, each partition built as
    ``entity`` from its fields plus ``current_leader`` (hinted for leadership errors)."""
    names = ctx.services.metadata_cache.topic_names
    by_topic: dict[uuid.UUID, list[Any]] = {}
    leaders: list[int] = []
    for topic_id, index, fields in answers:
        hint = (-1, -1)
        name = names.get(topic_id)
        if name is not None and (fields.get("error_code") in HINTED_ERRORS):
            hint = current_leader(ctx, TopicPartition(name, index))
            leaders.append(hint[0])
        leader = ctx.make("LeaderIdAndEpoch", leader_id=hint[0], leader_epoch=hint[1])
        by_topic.setdefault(topic_id, []).append(
            ctx.make(entity, partition_index=index, current_leader=leader, **fields)
        )
    responses = tuple(
        ctx.make(topic_entity, topic_id=topic_id, partitions=tuple(parts)) for topic_id, parts in by_topic.items()
    )
    return responses, node_endpoints(ctx, "NodeEndpoint", leaders)
