"""The recorded client request frames in tests/data/client_frames/ are valid Kafka traffic.

Each ``<client>.bin`` is a concatenation of records (4-byte big-endian length, then one request
frame as the client sent it, size prefix included); ``tools/record_traffic.py`` writes them and
their README. Every frame must carry a size prefix that matches its length, and every frame of an
API version the broker serves must decode with odradek's codec: header through
``parse_request_header``, body through ``decode_request``, with no bytes left over except where a
client is known to send them. Frames of versions the broker does not serve are skipped, one test
per (file, API, version), and may be at most a small share of each file.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import struct
import sys
from collections import defaultdict
from types import ModuleType

import pytest

from odradek.protocol.codec import api_schema, decode_request, parse_request_header, peek_api
from odradek.server.apis import API_HANDLERS

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "client_frames"
CLIENTS = ("aiokafka", "confluent_kafka", "kafka_python")
MAX_UNSERVED_SHARE = 0.05
TRAILING_BYTES_ALLOWED = {("rdkafka", 3, 12): 3}
"""librdkafka 2.x sends 3 extra bytes after some Metadata v12 requests (see ``decode_request``)."""


def read_records(path: pathlib.Path) -> list[bytes]:
    data = path.read_bytes()
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        assert pos + 4 <= len(data), f"{path.name}: truncated record length at byte {pos}"
        (length,) = struct.unpack_from(">I", data, pos)
        pos += 4
        assert pos + length <= len(data), f"{path.name}: record at byte {pos - 4} runs past the end"
        frames.append(data[pos : pos + length])
        pos += length
    return frames


def served(api_key: int, version: int) -> bool:
    module = API_HANDLERS.get(api_key)
    return module is not None and module.MIN_VERSION <= version <= module.MAX_VERSION


RECORDS = {client: read_records(CORPUS / f"{client}.bin") for client in CLIENTS if (CORPUS / f"{client}.bin").exists()}
GROUPS = sorted({(client, *struct.unpack_from(">hh", f, 4)) for client, frames in RECORDS.items() for f in frames})


@functools.cache
def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_traffic", ROOT / "tools" / "record_traffic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("record_traffic", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("client", CLIENTS)
def test_records_are_whole_frames(client: str) -> None:
    path = CORPUS / f"{client}.bin"
    assert path.exists(), f"{path} missing: run tools/record_traffic.py"
    assert path.stat().st_size <= 2_100_000
    frames = read_records(path)
    assert len(frames) >= 50
    by_api: dict[tuple[int, int], int] = defaultdict(int)
    for index, frame in enumerate(frames):
        assert len(frame) >= 4 + 10, f"{client} frame {index}: {len(frame)} bytes is shorter than a request header"
        (size,) = struct.unpack_from(">i", frame, 0)
        assert size == len(frame) - 4, f"{client} frame {index}: size prefix {size}, {len(frame) - 4} bytes follow"
        api_key, version, _correlation_id = peek_api(memoryview(frame)[4:])
        by_api[(api_key, version)] += 1
    unserved = {api: n for api, n in by_api.items() if not served(*api)}
    assert sum(unserved.values()) <= MAX_UNSERVED_SHARE * len(frames), f"{client}: unserved (api, version) {unserved}"
    for api_key in (0, 1, 3, 18):  # Produce, Fetch, Metadata, ApiVersions: every client sends them
        assert any(key == api_key for key, _ in by_api), f"{client}: no frame of api key {api_key}"


@pytest.mark.parametrize(("client", "api_key", "version"), GROUPS, ids=[f"{c}-{k}-v{v}" for c, k, v in GROUPS])
def test_frames_decode(client: str, api_key: int, version: int) -> None:
    if not served(api_key, version):
        pytest.skip(f"{client}: api key {api_key} v{version} is not served by the broker, so it has no codec to check")
    schema = api_schema(api_key, version)
    frames = [f for f in RECORDS[client] if struct.unpack_from(">hh", f, 4) == (api_key, version)]
    assert frames
    for frame in frames:
        body = memoryview(frame)[4:]
        assert peek_api(body)[:2] == (api_key, version)
        header = parse_request_header(body, schema.flexible)
        assert (header.api_key, header.api_version) == (api_key, version)
        assert header.client_id, "every client names itself"
        assert header.client_id != "odradek", "a broker-internal request got into the corpus"
        request = decode_request(schema, body, header.size)
        assert isinstance(request, schema.request_type)
        _request, consumed = schema.read_request(body.toreadonly(), header.size)
        left_over = len(body) - header.size - consumed
        assert left_over <= TRAILING_BYTES_ALLOWED.get((header.client_id, api_key, version), 0), (
            f"{client}: {left_over} bytes after the {schema.request_type.__name__} v{version} body"
        )


def test_readme_is_current() -> None:
    tool = _load_tool()
    readme = CORPUS / "README.md"
    assert readme.read_text() == tool.render_summary(CORPUS), "stale: run tools/record_traffic.py --summary"


def test_selection_dedupes_keeps_every_version_and_caps_size() -> None:
    tool = _load_tool()

    def frame(api_key: int, version: int, correlation_id: int, payload: bytes) -> bytes:
        body = struct.pack(">hhih", api_key, version, correlation_id, -1) + payload
        return struct.pack(">i", len(body)) + body

    conn = tool.RecordedConnection("c", 0)
    conn.frames = [frame(0, 9, i, b"x" * 100) for i in range(50)]  # identical but for the correlation id
    conn.frames += [frame(0, 9, 100 + i, bytes([i]) * 100) for i in range(50)]
    conn.frames += [frame(18, 3, 999, b"")]
    kept = tool.select_frames([conn], 1000)
    assert kept == [f for f in conn.frames if f in kept]  # send order is kept
    assert len({f[:8] + f[12:] for f in kept}) == len(kept)
    assert {struct.unpack_from(">hh", f, 4) for f in kept} == {(0, 9), (18, 3)}
    assert 900 < sum(4 + len(f) for f in kept) <= 1000
    huge = tool.RecordedConnection("c", 1, [frame(3, 12, 1, b"y" * 5000), frame(3, 12, 2, b"z")])
    assert tool.select_frames([huge], 1000) == huge.frames[:1]  # one of each version, whatever its size


SASL_CORPUS = ROOT / "tests" / "data" / "client_frames_sasl"


@pytest.mark.parametrize("client", [*CLIENTS, "kafka_python_gssapi"])
def test_sasl_corpus_holds_the_authentication_and_decodes(client: str) -> None:
    """tests/data/client_frames_sasl (tools/record_sasl_traffic.py): whole frames that decode, with
    SaslHandshake v1 and SaslAuthenticate among them."""
    frames = read_records(SASL_CORPUS / f"{client}.bin")
    apis = [struct.unpack_from(">hh", frame, 4) for frame in frames]
    assert {17, 36} <= {key for key, _ in apis}
    for frame, (api_key, version) in zip(frames, apis, strict=True):
        assert struct.unpack_from(">i", frame, 0)[0] == len(frame) - 4
        if not served(api_key, version):
            continue
        schema = api_schema(api_key, version)
        body = memoryview(frame)[4:]
        header = parse_request_header(body, schema.flexible)
        assert isinstance(decode_request(schema, body, header.size), schema.request_type)
