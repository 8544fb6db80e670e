"""Sending one hand-built request to a broker and reading its answer (the request limit tests)."""

from __future__ import annotations

import datetime
import socket
import struct
from typing import Any, Protocol

from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build, nested

ANSWER_WITHIN_S = 3.0
HUGE = 2**31 - 1


class HasPort(Protocol):
    @property
    def port(self) -> int: ...


def recv_frame(s: socket.socket) -> bytes | None:
    """One response frame, or None if the broker closed the connection."""
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def call(broker: HasPort, api_key: int, version: int, request: Any, wait_s: float = ANSWER_WITHIN_S) -> Any:
    """Send one request on a new connection; its decoded response, or None if the broker closed."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=wait_s) as s:
        s.sendall(encode_request(api_schema(api_key, version), 1, "limits", request))
        body = recv_frame(s)
    return None if body is None else decode_response(api_key, version, body)[1]


def create_topics_request(*topics: dict[str, Any]) -> Any:
    """A CreateTopics v7 request with a timeout of 2**31 - 1 ms; each topic a dict of ``name``,
    ``partitions`` and ``rf`` (default -1) and ``assign`` (partition -> broker ids)."""
    schema = api_schema(19, 7)
    entry = nested(schema.request_type, "CreatableTopic")
    assignment = nested(schema.request_type, "CreatableReplicaAssignment")
    return build(
        schema.request_type,
        topics=tuple(
            build(
                entry,
                name=t["name"],
                num_partitions=t.get("partitions", -1),
                replication_factor=t.get("rf", -1),
                assignments=tuple(
                    build(assignment, partition_index=p, broker_ids=tuple(b)) for p, b in t.get("assign", {}).items()
                ),
                configs=(),
            )
            for t in topics
        ),
        timeout=datetime.timedelta(milliseconds=HUGE),
        validate_only=False,
    )
