"""The metrics listener's request parsing and answers, driven through asyncio streams without sockets."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.http import MAX_HEAD_BYTES, HttpError, MetricsHttpServer, parse_listener, parse_request_head


class Writer:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def _server(ready: str | None = None, **kw: Any) -> MetricsHttpServer:
    registry = CollectorRegistry(auto_describe=False)
    stats = BrokerTopicStats()
    stats.produced("orders", 3, 120)
    registry.register(stats)

    async def readiness() -> str | None:
        return ready

    return MetricsHttpServer(registry, readiness, **kw)


def _exchange(request: bytes, eof: bool = True, ready: str | None = None, **kw: Any) -> tuple[int, bytes, Writer]:
    async def run() -> Writer:
        reader = asyncio.StreamReader(limit=MAX_HEAD_BYTES)
        reader.feed_data(request)
        if eof:
            reader.feed_eof()
        writer = Writer()
        await _server(ready, **kw).serve_connection(reader, cast(Any, writer))
        return writer

    writer = asyncio.run(run())
    head, _, body = bytes(writer.data).partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    return status, body, writer


def test_metrics_are_served_in_text_format() -> None:
    status, body, writer = _exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
    assert status == 200 and writer.closed
    assert b'kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 3\n' in body
    assert b"Content-Type: text/plain; version=0.0.4" in writer.data


def test_head_sends_no_body_and_query_strings_are_ignored() -> None:
    status, body, _ = _exchange(b"HEAD /metrics?name[]=x HTTP/1.1\r\n\r\n")
    assert status == 200 and body == b""


def test_health_endpoints() -> None:
    assert _exchange(b"GET /health/live HTTP/1.1\r\n\r\n")[:2] == (200, b"live\n")
    assert _exchange(b"GET /health/ready HTTP/1.0\r\n\r\n")[:2] == (200, b"ready\n")
    status, body, _ = _exchange(b"GET /health/ready HTTP/1.1\r\n\r\n", ready="shutting down")
    assert status == 503 and body == b"not ready: shutting down\n"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /nope HTTP/1.1\r\n\r\n", 404),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        (b"DELETE /metrics HTTP/1.1\r\n\r\n", 405),
        (b"GET /metrics\r\n\r\n", 400),
        (b"GET  /metrics HTTP/1.1\r\n\r\n", 400),
        (b"GET /metrics HTTP/2.0\r\n\r\n", 400),
        (b"GET metrics HTTP/1.1\r\n\r\n", 400),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413),
        (b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 413),
        (b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n", 431),
        (b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 10), 431),
    ],
)
def test_bad_requests_are_refused(request_bytes: bytes, status: int) -> None:
    got, _body, writer = _exchange(request_bytes)
    assert got == status
    assert writer.closed
    if status == 405:
        assert b"Allow: GET, HEAD" in writer.data


def test_a_slow_client_gets_408_after_the_head_timeout() -> None:
    status, _body, writer = _exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", eof=False, head_timeout_s=0.05)
    assert status == 408 and writer.closed


def test_a_client_that_hangs_up_mid_head_gets_nothing() -> None:
    status, _body, writer = _exchange(b"GET /metr", eof=True)
    assert status == 0 and writer.closed


def test_parse_request_head_directly() -> None:
    head = parse_request_head(b"GET /health/live?x=1 HTTP/1.1\r\nHost: a\r\nX-A:  b \r\n\r\n")
    assert (head.method, head.path, head.headers["x-a"]) == ("GET", "/health/live", "b")
    with pytest.raises(HttpError) as err:
        parse_request_head(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 2000 + b"\r\n")
    assert err.value.status == 431


def test_parse_listener() -> None:
    assert parse_listener("http://127.0.0.1:9404") == ("127.0.0.1", 9404)
    assert parse_listener("http://:0") == ("", 0)
    assert parse_listener("http://[::1]:9404/") == ("::1", 9404)
    for bad in ("https://h:1", "h:1", "http://h", "http://h:99999", "http://h:1/metrics"):
        with pytest.raises(ValueError):
            parse_listener(bad)
