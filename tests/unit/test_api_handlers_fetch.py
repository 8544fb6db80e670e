"""Fetch on fakes of its services: the handler frames its own response, which the test decodes."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v13 import request as fetch_v13

from odradek.errors import ErrorCode, NotLeaderOrFollowerError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.records import Record, build_batch
from odradek.server.apis import fetch
from odradek.storage import TopicPartition

from .api_fakes import FakeMetadataCache, FakeServices, call

BATCH = build_batch([Record(None, b"v")])


def _partition(module: Any, index: int) -> Any:
    return module.FetchPartition(
        partition=index,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )


def _request(module: Any, topics: tuple[Any, ...]) -> Any:
    return module.FetchRequest(
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=topics,
        forgotten_topics_data=(),
        rack_id="",
    )


def _decoded(version: int, parts: list[Any]) -> Any:
    frame = b"".join(parts)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, response = decode_response(ApiKey.FETCH, version, frame[4:])
    assert correlation_id == 7
    return response


def test_fetch_answers_each_partitions_records_or_error() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 2}))
    rm = services.replica_manager
    rm.records[TopicPartition("t", 0)], rm.offsets[TopicPartition("t", 0)] = BATCH, 1
    rm.errors[TopicPartition("t", 1)] = NotLeaderOrFollowerError()
    topic = fetch_v12.FetchTopic(topic="t", partitions=(_partition(fetch_v12, 0), _partition(fetch_v12, 1)))
    response = _decoded(12, call(fetch, services, 12, _request(fetch_v12, (topic,))))
    (answered,) = response.responses
    ok, refused = answered.partitions
    assert (answered.topic, ok.partition_index, ok.error_code, ok.high_watermark) == ("t", 0, ErrorCode.none, 1)
    assert bytes(ok.records) == BATCH
    assert (refused.partition_index, refused.error_code) == (1, ErrorCode.not_leader_or_follower)
    ((requests, options),) = rm.fetched
    assert [r.topic_partition for r in requests] == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert (options["max_wait_ms"], options["min_bytes"], options["replica_id"]) == (500, 1, -1)


def test_fetch_by_topic_id_answers_unknown_topic_id_without_reading() -> None:
    cache = FakeMetadataCache({"t": 1})
    services = FakeServices(metadata_cache=cache)
    known = fetch_v13.FetchTopic(topic_id=cache.topics["t"].topic_id, partitions=(_partition(fetch_v13, 0),))
    unknown = fetch_v13.FetchTopic(topic_id=uuid.uuid4(), partitions=(_partition(fetch_v13, 0),))
    response = _decoded(13, call(fetch, services, 13, _request(fetch_v13, (known, unknown))))
    answers = {t.topic_id: [p.error_code for p in t.partitions] for t in response.responses}
    assert answers == {known.topic_id: [ErrorCode.none], unknown.topic_id: [ErrorCode.unknown_topic_id]}
    ((requests, _),) = services.replica_manager.fetched
    assert [r.topic_partition for r in requests] == [TopicPartition("t", 0)]


def test_incremental_fetches_answer_changes_and_a_throttled_one_keeps_the_session() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 2}))
    rm = services.replica_manager
    topic = fetch_v12.FetchTopic(topic="t", partitions=(_partition(fetch_v12, 0), _partition(fetch_v12, 1)))
    full = _request(fetch_v12, (topic,))

    def fetch_at(session_id: int, epoch: int, topics: tuple[Any, ...] = ()) -> Any:
        request = dataclasses.replace(full, session_id=session_id, session_epoch=epoch, topics=topics)
        return _decoded(12, call(fetch, services, 12, request))

    opened = fetch_at(0, 0, (topic,))
    assert opened.session_id != 0 and [len(t.partitions) for t in opened.responses] == [2]
    sid = opened.session_id
    assert (fetch_at(sid, 1).error_code, fetch_at(sid, 2).responses) == (0, ())  # nothing changed
    rm.records[TopicPartition("t", 1)], rm.offsets[TopicPartition("t", 1)] = BATCH, 1
    (answered,) = fetch_at(sid, 3).responses
    assert [p.partition_index for p in answered.partitions] == [1]
    # every session partition was read, at the offsets the session keeps
    assert [r.topic_partition.partition for r in rm.fetched[-1][0]] == [0, 1]
    # over its quota: an empty answer, no error, the session kept and its epoch moved on
    services.client_quotas.fetch.update_quota(("<default>", "<default>"), 1.0)
    throttled = fetch_at(sid, 4)
    assert (throttled.error_code, throttled.session_id, throttled.responses) == (0, sid, ())
    assert throttled.throttle_time.total_seconds() > 0
    assert fetch_at(sid, 4).error_code == ErrorCode.invalid_fetch_session_epoch
