"""The transaction marker writer (``coordinator/transaction/markers.py``) against leaders in this
process: small asyncio servers on 127.0.0.1 that answer ApiVersions and WriteTxnMarkers v1 with
the error codes a test scripts. No broker, no other process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.transaction import markers
from odradek.coordinator.transaction.markers import MarkerWriter
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, encode_response, parse_request_header, peek_api
from odradek.protocol.messages import build, nested
from odradek.storage import TopicPartition

from .sasl_fake_broker import api_versions_response


@dataclass
class FakeLeader:
    """One leader: records each WriteTxnMarkers marker as ``(producer_id, epoch, commit,
    coordinator_epoch, [(topic, partition), ...])`` and answers each partition with the next code of
    ``script`` (NONE once it runs out)."""

    script: list[ErrorCode] = field(default_factory=list)
    seen: list[tuple[int, int, bool, int, list[tuple[str, int]]]] = field(default_factory=list)
    port: int = 0

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        response_type = api_schema(api_key, version).response_type
        if api_key == ApiKey.API_VERSIONS:
            return api_versions_response(response_type, {ApiKey.API_VERSIONS: (0, 3), ApiKey.WRITE_TXN_MARKERS: (1, 1)})
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        results = []
        for marker in request.markers:
            named = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
            self.seen.append(
                (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch, named)
            )
            topics = []
            for t in marker.topics:
                parts = []
                for p in t.partition_indexes:
                    code = self.script.pop(0) if self.script else ErrorCode.none
                    parts.append(
                        build(
                            nested(response_type, "WritableTxnMarkerPartitionResult"),
                            partition_index=p,
                            error_code=code,
                        )
                    )
                topics.append(
                    build(nested(response_type, "WritableTxnMarkerTopicResult"), name=t.name, partitions=tuple(parts))
                )
            results.append(
                build(
                    nested(response_type, "WritableTxnMarkerResult"),
                    producer_id=marker.producer_id,
                    topics=tuple(topics),
                )
            )
        return build(response_type, markers=tuple(results))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))
                api_key, version, _ = peek_api(frame)
                schema = api_schema(api_key, version)
                header = parse_request_header(frame, schema.flexible)
                response = self.answer(api_key, version, decode_request(schema, frame, header.size))
                writer.write(encode_response(schema, header.correlation_id, response))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class Metadata:
    """The metadata view the writer reads: partition counts, leaders and leader addresses."""

    counts: dict[str, int]
    leaders: dict[TopicPartition, int]
    addresses: dict[int, tuple[str, int]]

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def leader_of(self, tp: TopicPartition) -> int:
        return self.leaders.get(tp, -1)

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        return self.addresses.get(broker_id)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.addresses)


def run(test: Callable[[dict[int, FakeLeader], Metadata], Awaitable[None]], *scripts: list[ErrorCode]) -> None:
    """Start one leader per script (broker ids 1, 2, ...), then run ``test``."""

    async def main() -> None:
        leaders = {i + 1: FakeLeader(list(s)) for i, s in enumerate(scripts)}
        servers = []
        for leader in leaders.values():
            server = await asyncio.start_server(leader.serve, "127.0.0.1", 0)
            leader.port = server.sockets[0].getsockname()[1]
            servers.append(server)
        addresses = {i: ("127.0.0.1", leader.port) for i, leader in leaders.items()}
        try:
            await test(leaders, Metadata({}, {}, addresses))
        finally:
            for server in servers:
                server.close()
                await server.wait_closed()

    asyncio.run(main())


def test_one_request_per_leader_names_each_leaders_partitions() -> None:
    async def check(leaders: dict[int, FakeLeader], metadata: Metadata) -> None:
        metadata.counts.update({"t": 3, "u": 1})
        metadata.leaders.update(
            {TopicPartition("t", 0): 1, TopicPartition("t", 1): 2, TopicPartition("t", 2): 1, TopicPartition("u", 0): 2}
        )
        writer = MarkerWriter(9, metadata, lambda: None)
        try:
            done = await writer.write(7, 3, True, 5, [("t", 0), ("t", 1), ("t", 2), ("u", 0)], lambda: True)
        finally:
            await writer.close()
        assert done is True
        assert leaders[1].seen == [(7, 3, True, 5, [("t", 0), ("t", 2)])]
        assert leaders[2].seen == [(7, 3, True, 5, [("t", 1), ("u", 0)])]

    run(check, [], [])


def test_a_refused_marker_is_retried_and_a_fenced_one_is_not() -> None:
    async def check(leaders: dict[int, FakeLeader], metadata: Metadata) -> None:
        metadata.counts["t"] = 2
        metadata.leaders.update({TopicPartition("t", 0): 1, TopicPartition("t", 1): 1})
        writer = MarkerWriter(9, metadata, lambda: None)
        try:
            done = await writer.write(7, 3, False, 5, [("t", 0), ("t", 1)], lambda: True)
        finally:
            await writer.close()
        assert done is True
        # t-0 NOT_LEADER_OR_FOLLOWER then written; t-1 fenced by a newer epoch: given up at once
        assert [named for *_, named in leaders[1].seen] == [[("t", 0), ("t", 1)], [("t", 0)]]
        assert all(commit is False for _, _, commit, _, _ in leaders[1].seen)

    run(check, [ErrorCode.not_leader_or_follower, ErrorCode.invalid_producer_epoch])


def test_a_deleted_topic_is_given_up_and_a_lost_coordinatorship_stops_the_retries() -> None:
    async def check(leaders: dict[int, FakeLeader], metadata: Metadata) -> None:
        writer = MarkerWriter(9, metadata, lambda: None)
        try:
            assert await writer.write(7, 3, True, 5, [("gone", 0)], lambda: True) is True
            metadata.counts["t"] = 1  # known topic, no leader yet: retried until no longer the owner
            owner = iter([True, True, False])
            assert await writer.write(7, 3, True, 5, [("t", 0)], lambda: next(owner)) is False
        finally:
            await writer.close()
        assert leaders[1].seen == []

    markers.RETRY_BACKOFF_S, saved = 0.01, markers.RETRY_BACKOFF_S
    try:
        run(check, [])
    finally:
        markers.RETRY_BACKOFF_S = saved
