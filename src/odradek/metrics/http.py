"""The metrics listener (``metrics.listener=http://HOST:PORT``): a small HTTP/1.1 server on the
broker's event loop serving ``/metrics`` (Prometheus text format 0.0.4), ``/health/live`` and
``/health/ready``.

Requests are tiny and served one per connection (every response carries ``Connection: close``,
which Prometheus and orchestrators' probes handle). Bad input costs little and never blocks the loop:

- the request head (request line and headers) must end within :data:`MAX_HEAD_BYTES`, else
  **431**; it must arrive within ``head_timeout_s`` (default 5 s) from the connection's accept,
  else **408** and the connection closes (a slowloris client holds one socket for that long, no
  more);
- a request line that is not ``METHOD SP TARGET SP HTTP/1.x``, or a header line without a colon:
  **400**; a body (``Content-Length`` > 0 or ``Transfer-Encoding``): **413**;
- a method other than GET or HEAD: **405** (``Allow: GET, HEAD``); an unknown path: **404**;
- at most ``max_connections`` (default 64) connections at a time: one more is closed at once;
- writing the response must finish within ``write_timeout_s`` (a client that does not read is
  dropped).

``/health/live`` answers 200 while the loop runs. ``/health/ready`` answers 200 ``ready`` or 503
with the reason the readiness check returns (see :mod:`odradek.server.broker_metrics`). The query
string is ignored.

Runs on the broker's event loop; the registry's collectors are read there (a scrape of a broker
with 3,000 partitions takes tens of milliseconds, see ``bench/metrics_overhead.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from odradek.metrics.exposition import generate_text

__all__ = [
    "MAX_HEAD_BYTES",
    "HttpError",
    "MetricsHttpServer",
    "RequestHead",
    "parse_listener",
    "parse_request_head",
]

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
"""Longest request head (request line, headers, the blank line) accepted."""

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The classic Prometheus text format (:mod:`odradek.metrics.exposition`)."""

Readiness = Callable[[], Awaitable[str | None]]
"""Returns None when the broker is ready, else the reason it is not."""


class HttpError(Exception):
    """A request refused with ``status`` (the message is the response body)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class RequestHead:
    method: str
    path: str
    """The target without its query string."""
    headers: dict[str, str]
    """Header names in lower case; a repeated header keeps its last value."""


def parse_listener(value: str) -> tuple[str, int]:
    """``http://HOST:PORT`` -> (host, port); port 0 picks a free one; an empty host binds every
    interface. Raises ValueError for another scheme, a missing or bad port, or a path."""
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() != "http":
        raise ValueError(f"metrics.listener must be http://HOST:PORT, not {value!r}")
    if "/" in rest.rstrip("/"):
        raise ValueError(f"metrics.listener takes no path: {value!r}")
    host, colon, port = rest.rstrip("/").rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"metrics.listener needs a port 0..65535: {value!r}")
    return host.strip("[]"), int(port)


def parse_request_head(head: bytes) -> RequestHead:
    """Parse a request head ending with the blank line. Raises :class:`HttpError` 400 (malformed),
    405 (not GET/HEAD), 413 (a body) or 431 (longer than :data:`MAX_HEAD_BYTES`)."""
    if len(head) > MAX_HEAD_BYTES:
        raise HttpError(431, "request head too large")
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise HttpError(400, "request head is not ASCII") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1] or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise HttpError(400, "malformed request line")
    method, target, _version = parts
    if not (target.startswith("/") or target == "*"):
        raise HttpError(400, "malformed request target")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HttpError(400, "malformed header line")
        headers[name.lower()] = value.strip()
    if method not in ("GET", "HEAD"):
        raise HttpError(405, f"method {method} not allowed")
    length = headers.get("content-length", "0")
    if "transfer-encoding" in headers or not length.isdigit() or int(length) > 0:
        raise HttpError(413, "requests carry no body")
    return RequestHead(method, target.split("?", 1)[0], headers)


def _response(status: int, body: bytes, content_type: str, head_only: bool = False, extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return head if head_only else head + body


class MetricsHttpServer:
    """``/metrics`` from ``registry`` and the health endpoints (see the module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        readiness: Readiness,
        *,
        prepare: Callable[[], Awaitable[None]] | None = None,
        prepare_timeout_s: float = 2.0,
        head_timeout_s: float = 5.0,
        write_timeout_s: float = 10.0,
        max_connections: int = 64,
    ) -> None:
        self.registry = registry
        self.readiness = readiness
        self.prepare = prepare
        """Awaited before each scrape (at most ``prepare_timeout_s``; a failure is logged and the
        scrape answers with what the collectors have)."""
        self.prepare_timeout_s = prepare_timeout_s
        self.head_timeout_s = head_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_connections = max_connections
        self.open_connections = 0
        self.scrapes = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; the bound (host, port)."""
        self._server = await asyncio.start_server(
            self._accept, host or None, port, limit=MAX_HEAD_BYTES, reuse_address=True
        )
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.max_connections:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.open_connections += 1
        try:
            await self.serve_connection(reader, writer)
        finally:
            self.open_connections -= 1
            if task is not None:
                self._tasks.discard(task)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read one request head, answer it, close. Never raises (a failure closes the connection)."""
        try:
            try:
                head = await asyncio.wait_for(self._read_head(reader), self.head_timeout_s)
                request = parse_request_head(head)
                response = await self._answer(request)
            except HttpError as exc:
                extra = "Allow: GET, HEAD\r\n" if exc.status == 405 else ""
                response = _response(exc.status, f"{exc}\n".encode(), "text/plain; charset=utf-8", extra=extra)
            except TimeoutError:
                response = _response(408, b"request head not received in time\n", "text/plain; charset=utf-8")
            writer.write(response)
            await asyncio.wait_for(writer.drain(), self.write_timeout_s)
        except asyncio.CancelledError:
            raise
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("metrics listener: unexpected error serving a request")
        finally:
            writer.close()

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> bytes:
        try:
            return await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, "request head too large") from None
        except asyncio.IncompleteReadError as exc:
            if len(exc.partial) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large") from None
            raise

    async def _answer(self, request: RequestHead) -> bytes:
        head_only = request.method == "HEAD"
        text = "text/plain; charset=utf-8"
        if request.path == "/metrics":
            self.scrapes += 1
            if self.prepare is not None:
                try:
                    await asyncio.wait_for(self.prepare(), self.prepare_timeout_s)
                except Exception as exc:
                    log.warning("metrics listener: preparing a scrape failed: %s", exc or type(exc).__name__)
            return _response(200, generate_text(self.registry), CONTENT_TYPE, head_only)
        if request.path == "/health/live":
            return _response(200, b"live\n", text, head_only)
        if request.path == "/health/ready":
            reason = await self.readiness()
            if reason is None:
                return _response(200, b"ready\n", text, head_only)
            return _response(503, f"not ready: {reason}\n".encode(), text, head_only)
        raise HttpError(404, f"no such path {request.path}")
