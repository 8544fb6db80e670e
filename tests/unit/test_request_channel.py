"""The socket layer and the request handler meet only through ``server/request_channel.py``.

The handler's answers are typed: an encoded frame (:class:`SendResponse`), or
:class:`CloseConnection` raised for what Kafka closes the connection on. No sockets: frames are
built in memory and the handler is called directly.
"""

from __future__ import annotations

import ast
import asyncio
import pathlib
import struct
from typing import Any

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.server.request_channel import CloseConnection, RequestTimes, SendResponse
from odradek.server.request_handler import RequestHandler
from odradek.server.session import PLAINTEXT_SESSION

SERVER = pathlib.Path(__file__).resolve().parents[2] / "src" / "odradek" / "server"


class Connection:
    peer = "127.0.0.1:5555"
    connection_id = "conn-test"
    session = PLAINTEXT_SESSION
    times = RequestTimes()


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def test_socket_server_and_request_handler_do_not_import_each_other() -> None:
    for socket_side in ("socket_server.py", "server_connection.py", "produce_pipeline.py"):
        assert "odradek.server.request_handler" not in _imports(SERVER / socket_side)
    handler_imports = _imports(SERVER / "request_handler.py")
    assert "odradek.server.socket_server" not in handler_imports
    assert "odradek.server.server_connection" not in handler_imports


def _handle(frame: bytes) -> Any:
    handler = RequestHandler(broker=None)  # type: ignore[arg-type]  # ApiVersions needs no broker
    return asyncio.run(handler.handle(frame[4:], Connection()))


def test_api_versions_is_answered_with_an_encoded_frame() -> None:
    schema = api_schema(ApiKey.API_VERSIONS, 3)
    request = schema.request_type(client_software_name="t", client_software_version="1")
    response = _handle(encode_request(schema, 7, "c", request))
    assert isinstance(response, SendResponse)
    correlation_id, decoded = decode_response(ApiKey.API_VERSIONS, 3, bytes(response.frame[4:]))
    assert correlation_id == 7
    assert {int(k.api_key) for k in decoded.api_keys} >= {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LEADER_AND_ISR}


def test_api_versions_at_an_unknown_version_gets_the_kip_511_answer() -> None:
    frame = struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 99, 7, -1)
    response = _handle(frame)
    assert isinstance(response, SendResponse)
    assert struct.unpack_from(">ih", response.frame, 4) == (7, 35)  # UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">ihhih", 10, ApiKey.SASL_HANDSHAKE, 0, 7, -1),  # a key this broker does not serve
        struct.pack(">ihhih", 10, ApiKey.METADATA, 99, 7, -1),  # a version it does not serve
        struct.pack(">ih", 2, 0),  # shorter than a header
    ],
)
def test_what_kafka_closes_the_connection_on_raises_close_connection(frame: bytes) -> None:
    with pytest.raises(CloseConnection):
        _handle(frame)


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_finalizes_the_group_and_share_version_features(version: int) -> None:
    schema = api_schema(ApiKey.API_VERSIONS, version)
    request = schema.request_type(client_software_name="t", client_software_version="1")
    response = _handle(encode_request(schema, 7, "c", request))
    assert isinstance(response, SendResponse)
    _, decoded = decode_response(ApiKey.API_VERSIONS, version, bytes(response.frame[4:]))
    assert decoded.finalized_features_epoch >= 0
    assert [(f.name, f.min_version_level, f.max_version_level) for f in decoded.finalized_features] == [
        ("group.version", 1, 1),
        ("share.version", 1, 1),
    ]
    supported = [(f.name, f.min_version, f.max_version) for f in decoded.supported_features]
    expected = [("group.version", 0, 1), ("share.version", 0, 1)]
    assert supported == (expected if version >= 4 else [])  # v3 omits minimum-0 features
