"""A fault-injecting TCP proxy (asyncio) with per-link rules.

Every connection of the campaign's cluster passes through one :class:`FaultProxy`: each
:class:`Route` listens on an address and forwards to an upstream address. A connection is a *link*
``(source, destination)`` of node names: the destination is the route's, the source is the
route's fixed source (a broker's own ZooKeeper port) or, when it has none, the node whose
loopback address the peer connected from (``sources``: ``{"127.0.0.11": "b1"}``; any other
address is ``"client"``). So ``b1 -> b2`` can be cut while ``b3 -> b2`` still works.

Faults per link (:class:`LinkRule`, held by the pure :class:`FaultTable`):

- ``drop``: a partition. Nothing is forwarded either way on the link's connections and new
  connections are accepted but carry nothing; sockets stay open, so TCP peers see silence
  (timeouts), never a close. Bytes read before the cut wait and are delivered after a heal, as
  TCP retransmission would deliver them; a link cut for good is torn down by its peers' timeouts.
- ``latency_s``: each chunk is held this long before it is forwarded.
- ``bandwidth_bps``: forwarding sleeps ``len(chunk) / bandwidth`` after each chunk.
- :meth:`FaultProxy.reset`: every open connection of the matching links is closed with an RST
  (``SO_LINGER`` 0) at once.

:class:`FaultTable` is plain data (no sockets; unit-tested). :class:`FaultProxy` runs on its own
thread and event loop (:meth:`FaultProxy.start`); its fault methods may be called from any
thread (they change the table under a lock and wake the pumps through the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

__all__ = ["CLIENT", "FaultProxy", "FaultTable", "LinkRule", "Route"]

CLIENT = "client"
"""The source name of a connection from an address no node owns (the workloads' clients)."""

CHUNK = 65536


@dataclass(frozen=True)
class LinkRule:
    """What happens to the bytes of one directed link; the default forwards them untouched."""

    drop: bool = False
    latency_s: float = 0.0
    bandwidth_bps: float | None = None

    @property
    def clean(self) -> bool:
        return not self.drop and self.latency_s == 0.0 and self.bandwidth_bps is None


CLEAN = LinkRule()


@dataclass
class FaultTable:
    """The rules of every directed link ``(source, destination)``; absent means :data:`CLEAN`.

    A partition is symmetric: cutting ``a`` from ``b`` drops the connections ``a`` opened to ``b``
    and those ``b`` opened to ``a`` (each carries both directions of its traffic)."""

    rules: dict[tuple[str, str], LinkRule] = field(default_factory=dict)

    def rule(self, source: str, destination: str) -> LinkRule:
        return self.rules.get((source, destination), CLEAN)

    def _update(self, source: str, destination: str, **changes: object) -> None:
        new = replace(self.rule(source, destination), **changes)  # type: ignore[arg-type]
        if new.clean:
            self.rules.pop((source, destination), None)
        else:
            self.rules[(source, destination)] = new

    def cut(self, a: str, b: str) -> None:
        """Partition ``a`` from ``b`` (both directions)."""
        self._update(a, b, drop=True)
        self._update(b, a, drop=True)

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """Cut every node of ``side_a`` from every node of ``side_b``."""
        b_nodes = list(side_b)
        for a in side_a:
            for b in b_nodes:
                if a != b:
                    self.cut(a, b)

    def slow(self, a: str, b: str, latency_s: float = 0.0, bandwidth_bps: float | None = None) -> None:
        """Added latency and/or a bandwidth limit on both directions between ``a`` and ``b``."""
        self._update(a, b, latency_s=latency_s, bandwidth_bps=bandwidth_bps)
        self._update(b, a, latency_s=latency_s, bandwidth_bps=bandwidth_bps)

    def heal(self) -> None:
        """Every link clean again."""
        self.rules.clear()

    def cut_links(self) -> list[tuple[str, str]]:
        return sorted(k for k, r in self.rules.items() if r.drop)


@dataclass(frozen=True)
class Route:
    """Listen on ``listen`` and forward to ``upstream``; connections go to node ``destination``
    from ``source`` (None: the node owning the peer's address)."""

    listen: tuple[str, int]
    upstream: tuple[str, int]
    destination: str
    source: str | None = None


class _Connection:
    def __init__(self, link: tuple[str, str], client: socket.socket | None) -> None:
        self.link = link
        self.sockets: list[socket.socket] = [client] if client is not None else []
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []

    def reset(self) -> None:
        """Close with an RST: SO_LINGER on, timeout 0."""
        for writer in self.writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class FaultProxy:
    """The proxy of every route; see the module docstring."""

    def __init__(self, routes: Iterable[Route] = (), sources: dict[str, str] | None = None) -> None:
        self.routes = list(routes)
        self.sources = dict(sources or {})
        self.table = FaultTable()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[Route, asyncio.AbstractServer] = {}
        self._connections: set[_Connection] = set()
        self._changed: asyncio.Event | None = None
        self.bytes_forwarded = 0

    # --- lifecycle (any thread) -------------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._changed = asyncio.Event()
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        for route in self.routes:
            self._call(self._listen(route))
        return self

    def add_route(self, route: Route) -> None:
        self.routes.append(route)
        if self._loop is not None:
            self._call(self._listen(route))

    def close(self) -> None:
        if self._loop is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def _call(self, coro: object) -> object:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)  # type: ignore[arg-type]

    # --- faults (any thread) ----------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        self._change(lambda t: t.cut(a, b))

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        a, b = list(side_a), list(side_b)
        self._change(lambda t: t.partition(a, b))

    def slow(self, a: str, b: str, latency_s: float = 0.0, bandwidth_bps: float | None = None) -> None:
        self._change(lambda t: t.slow(a, b, latency_s, bandwidth_bps))

    def heal(self) -> None:
        self._change(lambda t: t.heal())

    def reset(self, a: str, b: str) -> int:
        """RST every open connection between ``a`` and ``b`` (either direction); how many."""

        async def run() -> int:
            hit = [c for c in self._connections if c.link in ((a, b), (b, a))]
            for c in hit:
                c.reset()
                self._connections.discard(c)
            return len(hit)

        count = self._call(run())
        assert isinstance(count, int)
        return count

    def _change(self, change: object) -> None:
        with self._lock:
            change(self.table)  # type: ignore[operator]
        if self._loop is not None and self._changed is not None:
            self._loop.call_soon_threadsafe(self._changed.set)

    def rule(self, source: str, destination: str) -> LinkRule:
        with self._lock:
            return self.table.rule(source, destination)

    # --- the event loop ---------------------------------------------------------------------

    async def _listen(self, route: Route) -> None:
        server = await asyncio.start_server(
            lambda r, w: self._accept(route, r, w), route.listen[0], route.listen[1], reuse_address=True
        )
        self._servers[route] = server

    async def _shutdown(self) -> None:
        for server in self._servers.values():
            server.close()
        for c in list(self._connections):
            c.reset()
        self._connections.clear()

    def source_of(self, route: Route, peer_host: str) -> str:
        return route.source or self.sources.get(peer_host, CLIENT)

    async def _accept(self, route: Route, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        link = (self.source_of(route, peer[0] if peer else ""), route.destination)
        conn = _Connection(link, None)
        conn.writers.append(writer)
        self._connections.add(conn)
        try:
            up_reader, up_writer = await asyncio.open_connection(*route.upstream)
        except OSError:
            conn.reset()
            self._connections.discard(conn)
            return
        conn.writers.append(up_writer)
        forward = asyncio.ensure_future(self._pump(link, reader, up_writer))
        backward = asyncio.ensure_future(self._pump((link[1], link[0]), up_reader, writer, rule_link=link))
        conn.tasks += [forward, backward]
        try:
            await asyncio.wait([forward, backward], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in conn.tasks:
                task.cancel()
            for w in conn.writers:
                w.close()
            self._connections.discard(conn)

    async def _pump(
        self,
        direction: tuple[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        rule_link: tuple[str, str] | None = None,
    ) -> None:
        """Forward ``reader`` to ``writer`` under the rule of the connection's link (the rule of
        ``a -> b`` governs both directions of a connection ``a`` opened to ``b``)."""
        link = rule_link or direction
        assert self._changed is not None
        while True:
            try:
                data = await reader.read(CHUNK)
            except (ConnectionError, OSError):
                return
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            rule = self.rule(*link)
            while rule.drop:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), 0.5)
                rule = self.rule(*link)
            if rule.latency_s:
                await asyncio.sleep(rule.latency_s)
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return
            self.bytes_forwarded += len(data)
            if rule.bandwidth_bps:
                await asyncio.sleep(len(data) / rule.bandwidth_bps)
