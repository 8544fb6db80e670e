"""The coordination store over a real Apache ZooKeeper ensemble, through kazoo.

This module, :mod:`odradek.metadata.zookeeper_watch` (its watches) and
:mod:`odradek.metadata.zookeeper_tls` (its TLS connections) are the only ones that import kazoo.
``ZooKeeperStore(connect)`` takes Kafka's ``zookeeper.connect`` value,
``host:port[,host:port...][/chroot]``; ``await store.start()`` creates the chroot if it is missing
(as Kafka does) and opens one session, raising :class:`~odradek.metadata.errors.StoreUnavailableError`
("cannot reach ZooKeeper at ... within N ms") when no server answers within
``connection_timeout_ms``. One store = one ZooKeeper session: ephemeral nodes belong to it and
vanish on ``close()`` or session expiry.

Bridging: every operation issues kazoo's ``*_async`` call from the event loop (non-blocking) and
awaits its result, delivered from kazoo's completion thread with ``loop.call_soon_threadsafe``.
An operation that gets no answer within ``request_timeout_ms`` (default: the session timeout), or
fails with a connection loss or an expired session, raises ``StoreUnavailableError`` naming the
connect string; writes are not retried (their outcome is unknown: the caller re-reads).

Batches (``get_many``, ``multi_many``): a worker thread writes every request before it waits
for the first answer (pipelining, as Kafka's ``KafkaZkClient`` sends its batched requests), then
collects the answers; the loop awaits one result for the batch. Thousands of partition states are
read in a few hundred milliseconds that way, where one awaited read each held the loop about as
long again (0.7 s of 0.77 s for 3,000 reads, measured).

Watches are one-shot in ZooKeeper; each handle re-arms its watch on the loop before calling the
callback, so no change goes unseen (events may coalesce). kazoo drops all watches when the
connection drops; on reconnection every watch is re-armed and its callback called once.
Session events (``watch_session``): SUSPENDED on connection loss, CONNECTED when the same session
resumes, EXPIRED once kazoo has replaced an expired session with a new one (re-register ephemerals).

Security: with ``tls`` (an ``ssl.SSLContext`` from Kafka's ``zookeeper.ssl.*`` keys,
:mod:`odradek.security.zookeeper_tls`) every connection is TLS through
:class:`~odradek.metadata.zookeeper_tls.TlsThreadingHandler`; a start that fails says why the last
handshake failed (certificate not trusted, host name mismatch, not a TLS port), still within
``connection_timeout_ms``. With ``sasl`` the session logs in with SASL DIGEST-MD5 (ZooKeeper then knows it as
``sasl:<username>``); with ``secure_acls`` (Kafka's ``zookeeper.set.acl``) every znode this store
creates, the chroot and the parents of ``makepath`` included, gets Kafka's default ACLs for its
path (:func:`odradek.security.zookeeper_auth.default_acls`), each parent its own.

Threading: call everything from the event loop that ran ``start()``; kazoo's threads only
schedule work onto that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Id

from odradek.metadata.errors import (
    BadVersionError,
    CoordinationError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)
from odradek.metadata.store import (
    ANY_VERSION,
    CheckVersionOp,
    CoordinationStore,
    CreateOp,
    DeleteOp,
    Op,
    SessionCallback,
    SessionState,
    SetDataOp,
    WatchCallback,
    WatchHandle,
    ZnodeStat,
    join_path,
    validate_path,
)
from odradek.metadata.zookeeper_multi_read import MULTI_READ_CHUNK, MalformedMultiReadError, start_multi_read
from odradek.metadata.zookeeper_tls import TlsThreadingHandler
from odradek.metadata.zookeeper_watch import SessionWatch, ZkWatch
from odradek.security.zookeeper_auth import ZkAcl, ZkSaslCredentials, default_acls

__all__ = ["ZooKeeperStore", "parse_connect_string"]

log = logging.getLogger(__name__)


def parse_connect_string(connect: str) -> tuple[str, str]:
    """Split Kafka's ``zookeeper.connect`` into ``(hosts, chroot)``; chroot is ``""`` when absent.

    ``"zk1:2181,zk2:2181/kafka"`` -> ``("zk1:2181,zk2:2181", "/kafka")``. Raises ``ValueError``
    for an empty host list, a port that is not a number, or a malformed chroot.
    """
    text = connect.strip()
    slash = text.find("/")
    hosts, chroot = (text, "") if slash < 0 else (text[:slash], text[slash:])
    if chroot == "/":
        chroot = ""
    if chroot:
        validate_path(chroot)
    entries = [h.strip() for h in hosts.split(",") if h.strip()]
    if not entries:
        raise ValueError(f"zookeeper.connect has no host: {connect!r}")
    for entry in entries:
        host, sep, port = entry.rpartition(":")
        if sep and (not host or not port.isdigit()):
            raise ValueError(f"zookeeper.connect has a bad host:port {entry!r} in {connect!r}")
    return ",".join(entries), chroot


def _stat(s: Any) -> ZnodeStat:
    return ZnodeStat(
        version=s.version,
        cversion=s.cversion,
        ctime=s.ctime,
        mtime=s.mtime,
        ephemeral_owner=s.ephemeralOwner,
        num_children=s.numChildren,
        data_length=s.dataLength,
        czxid=s.czxid,
    )


def reconnect_retry(session_timeout_ms: int) -> KazooRetry:
    """How a lost connection is retried: for ever, the pause between attempts growing from 0.1 s
    to at most ``min(1 s, session timeout / 3)`` (plus up to 0.2 s of jitter), as ZooKeeper's Java
    client pauses under a second between attempts. kazoo's default doubles up to 60 s: after a
    ZooKeeper outage of ten seconds its next attempt came after the restarted server had already
    expired the session (which survives a restart only if the client is back within the timeout)."""
    return KazooRetry(
        max_tries=-1, delay=0.1, backoff=2, max_jitter=0.2, max_delay=min(1.0, session_timeout_ms / 3000.0)
    )


class ZooKeeperStore(CoordinationStore):
    """One kazoo session with a ZooKeeper ensemble; see the module docstring."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        request_timeout_ms: int | None = None,
        *,
        sasl: ZkSaslCredentials | None = None,
        secure_acls: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.connect = connect
        self.sasl = sasl
        self.tls = tls
        self._tls_handler: TlsThreadingHandler | None = None
        self.secure_acls = secure_acls
        self.hosts, self.chroot = parse_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.request_timeout_ms = request_timeout_ms or session_timeout_ms
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session_id = 0
        self._expired = False
        self._closed = False
        self._multi_read = True
        """False once the server refused a ``multiRead`` (ZooKeeper before 3.6)."""
        self._watches: set[ZkWatch] = set()
        self._session_callbacks: list[SessionWatch] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"ZooKeeperStore({self.connect!r}, session 0x{self._session_id:x})"

    async def __aenter__(self) -> ZooKeeperStore:
        await self.start()
        return self

    # -- connection ----------------------------------------------------------------------------------

    def _new_client(self, hosts: str) -> KazooClient:
        sasl = self.sasl
        options = (
            None if sasl is None else {"mechanism": "DIGEST-MD5", "username": sasl.username, "password": sasl.password}
        )
        handler = None
        if self.tls is not None:
            handler = self._tls_handler = TlsThreadingHandler(self.tls)
        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000.0,
            sasl_options=options,
            connection_retry=reconnect_retry(self.session_timeout_ms),
            handler=handler,
            use_ssl=self.tls is not None,
        )

    def _acls(self, path: str) -> list[ACL]:
        return [ACL(a.perms, Id(a.scheme, a.id)) for a in default_acls(self.secure_acls, path)]

    async def start(self) -> None:
        """Connect (creating the chroot if missing). Raises StoreUnavailableError if unreachable."""
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        timeout_s = self.connection_timeout_ms / 1000.0
        unreachable = StoreUnavailableError(
            f"cannot reach ZooKeeper at {self.connect} within {self.connection_timeout_ms} ms"
        )

        def connect() -> KazooClient:
            if self.chroot:
                bootstrap = self._new_client(self.hosts)
                try:
                    bootstrap.start(timeout=timeout_s)
                    bootstrap.ensure_path(self.chroot, acl=self._acls(""))
                finally:
                    _stop_and_close(bootstrap)
            client = self._new_client(self.hosts + self.chroot)
            client.start(timeout=timeout_s)
            return client

        try:
            client = await asyncio.to_thread(connect)
        except KazooTimeoutError:
            failure = self._tls_handler.last_failure if self._tls_handler is not None else None
            if failure is not None:
                raise StoreUnavailableError(f"{unreachable}: {failure}") from None
            raise unreachable from None
        except kz.KazooException as e:
            raise StoreUnavailableError(f"cannot use ZooKeeper at {self.connect}: {e!r}") from e
        if self._closed:  # closed while connecting: this session is nobody's
            await asyncio.to_thread(_stop_and_close, client)
            raise StoreUnavailableError(f"ZooKeeper session with {self.connect} is closed")
        client_id = client.client_id
        self._session_id = client_id[0] if client_id else 0
        client.add_listener(self._kazoo_state_listener)
        self._client = client
        log.info("connected to ZooKeeper at %s, session 0x%x", self.connect, self._session_id)

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def connected(self) -> bool:
        return self._client is not None and bool(self._client.connected)

    def _loop_or_raise(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise StoreUnavailableError(f"ZooKeeperStore({self.connect}) is not started")
        return self._loop

    def _client_or_raise(self) -> KazooClient:
        if self._closed:
            raise StoreUnavailableError(f"ZooKeeper session with {self.connect} is closed")
        if self._client is None:
            raise StoreUnavailableError(f"ZooKeeperStore({self.connect}) is not started")
        return self._client

    def _call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Schedule ``fn(*args)`` on the loop from any thread (dropped if the loop is gone)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # loop closed between the check and the call

    def _kazoo_state_listener(self, state: str) -> None:
        """Runs on a kazoo thread; must not block."""
        self._call_soon(self._on_state, state)

    def _on_state(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            self._expired = True
            log.warning("ZooKeeper session 0x%x with %s expired", self._session_id, self.connect)
            return
        if state == KazooState.SUSPENDED:
            log.warning("connection to ZooKeeper at %s lost", self.connect)
            self._notify_session(SessionState.SUSPENDED)
            return
        client = self._client
        client_id = client.client_id if client is not None else None
        if client_id is None:
            return  # already disconnected again; a later CONNECTED follows
        new_id = client_id[0]
        expired = self._expired or new_id != self._session_id
        self._expired = False
        self._session_id = new_id
        log.info("ZooKeeper at %s: session 0x%x %s", self.connect, new_id, "new" if expired else "resumed")
        for watch in list(self._watches):
            watch.trigger(True, True)
        self._notify_session(SessionState.EXPIRED if expired else SessionState.CONNECTED)

    def _notify_session(self, state: SessionState) -> None:
        loop = self._loop_or_raise()
        for watch in list(self._session_callbacks):
            if watch.cancelled:
                continue

            async def run(cb: SessionCallback = watch.callback) -> None:
                try:
                    await cb(state)
                except Exception:
                    log.exception("session callback %r failed", cb)

            task = loop.create_task(run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- request bridge ------------------------------------------------------------------------------

    def _translate(self, e: BaseException, what: str, path: str) -> BaseException:
        if isinstance(e, kz.NoNodeError):
            return NoNodeError.at(path)
        if isinstance(e, kz.NodeExistsError):
            return NodeExistsError.at(path)
        if isinstance(e, kz.BadVersionError):
            return BadVersionError(f"Version conflict at {path}", path)
        if isinstance(e, kz.NotEmptyError):
            return NotEmptyError.at(path)
        if isinstance(e, kz.NoChildrenForEphemeralsError):
            return NoChildrenForEphemeralsError.at(path)
        if isinstance(e, kz.NoAuthError):
            return NoAuthError.at(path)
        if isinstance(e, kz.ConnectionLoss | kz.SessionExpiredError | kz.ConnectionClosedError):
            return StoreUnavailableError(f"ZooKeeper at {self.connect}: {what} {path} failed: {type(e).__name__}", path)
        return e

    async def _wait(self, async_result: Any, what: str, path: str) -> Any:
        loop = self._loop_or_raise()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def done(result: Any) -> None:  # kazoo completion thread
            try:
                value, error = result.get(block=False), None
            except BaseException as e:
                value, error = None, e
            self._call_soon(settle, value, error)

        async_result.rawlink(done)
        try:
            return await asyncio.wait_for(future, self.request_timeout_ms / 1000.0)
        except TimeoutError:
            raise StoreUnavailableError(
                f"ZooKeeper at {self.connect} did not answer {what} {path} within {self.request_timeout_ms} ms",
                path,
            ) from None
        except Exception as e:
            raise self._translate(e, what, path) from None

    # -- operations ----------------------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        client = self._client_or_raise()
        validate_path(path)
        if makepath and self.secure_acls:
            await self._ensure_parents(client, path)
            makepath = False
        acl = self._acls(path)
        result = client.create_async(
            path, bytes(data), acl=acl, ephemeral=ephemeral, sequence=sequential, makepath=makepath
        )
        created: str = await self._wait(result, "create", path)
        return created

    async def _ensure_parents(self, client: KazooClient, path: str) -> None:
        """Create the missing parents of ``path``, each with its own path's ACLs."""
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            try:
                await self._wait(client.create_async(parent, b"", acl=self._acls(parent)), "create", parent)
            except NodeExistsError:
                pass

    async def get_acls(self, path: str) -> list[ZkAcl]:
        """The ACLs of a znode, as ZooKeeper stores them (``auth`` resolved to the creator's ids)."""
        client = self._client_or_raise()
        acls, _stat = await self._wait(client.get_acls_async(validate_path(path)), "get_acls", path)
        return [ZkAcl(a.perms, a.id.scheme, a.id.id) for a in acls]

    async def set_default_acls(self, path: str) -> None:
        """Replace the ACLs of a znode (any ACL version) with this store's defaults for its path
        (Kafka's ``defaultAcls``: secure with ``secure_acls``, else open to all). NoNodeError if
        it is gone; NoAuthError without ADMIN on it."""
        client = self._client_or_raise()
        await self._wait(client.set_acls_async(validate_path(path), self._acls(path), -1), "set_acls", path)

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        client = self._client_or_raise()
        data, stat = await self._wait(client.get_async(validate_path(path)), "get", path)
        return (data or b""), _stat(stat)

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> ZnodeStat:
        client = self._client_or_raise()
        stat = await self._wait(client.set_async(validate_path(path), bytes(data), version), "set", path)
        return _stat(stat)

    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        client = self._client_or_raise()
        if validate_path(path) == "/":
            raise ValueError("the root znode / cannot be deleted")
        if recursive:
            for attempt in range(5):
                for child in await self.get_children(path):
                    try:
                        await self.delete(join_path(path, child), recursive=True)
                    except NoNodeError:
                        pass  # deleted concurrently
                try:
                    await self._wait(client.delete_async(path, version), "delete", path)
                    return
                except NotEmptyError:
                    if attempt == 4:
                        raise  # children keep appearing
        await self._wait(client.delete_async(path, version), "delete", path)

    async def exists(self, path: str) -> ZnodeStat | None:
        client = self._client_or_raise()
        stat = await self._wait(client.exists_async(validate_path(path)), "exists", path)
        return _stat(stat) if stat is not None else None

    async def get_children(self, path: str) -> list[str]:
        client = self._client_or_raise()
        children = await self._wait(client.get_children_async(validate_path(path)), "get_children", path)
        return sorted(children)

    def _watch(self, path: str, children: bool, callback: WatchCallback) -> WatchHandle:
        client = self._client_or_raise()
        watch = ZkWatch(self, validate_path(path), children, callback)
        self._watches.add(watch)
        watch.start(client)
        return watch

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch(path, True, callback)

    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        return self._watch(path, False, callback)

    def watch_session(self, callback: SessionCallback) -> WatchHandle:
        watch = SessionWatch(callback, self._session_callbacks)
        self._session_callbacks.append(watch)
        return watch

    def _transaction(self, client: KazooClient, ops: Sequence[Op]) -> Any:
        transaction = client.transaction()
        for op in ops:
            validate_path(op.path)
            if isinstance(op, CreateOp):
                transaction.create(
                    op.path, bytes(op.data), acl=self._acls(op.path), ephemeral=op.ephemeral, sequence=op.sequential
                )
            elif isinstance(op, SetDataOp):
                transaction.set_data(op.path, bytes(op.data), op.version)
            elif isinstance(op, DeleteOp):
                transaction.delete(op.path, op.version)
            elif isinstance(op, CheckVersionOp):
                transaction.check(op.path, op.version)
            else:
                raise TypeError(f"not a multi op: {op!r}")
        return transaction

    def _multi_results(self, ops: Sequence[Op], raw: Sequence[Any]) -> list[str | ZnodeStat | None]:
        """A committed transaction's results, or the translated error of its first failing op."""
        for op, result in zip(ops, raw, strict=False):
            if isinstance(result, Exception) and not isinstance(result, kz.RolledBackError):
                raise self._translate(result, "multi", op.path)
        results: list[str | ZnodeStat | None] = []
        for op, result in zip(ops, raw, strict=False):
            if isinstance(op, CreateOp):
                results.append(str(result))
            elif isinstance(op, SetDataOp):
                results.append(_stat(result))
            else:
                results.append(None)
        return results

    async def multi(self, ops: Sequence[Op]) -> list[str | ZnodeStat | None]:
        client = self._client_or_raise()
        transaction = self._transaction(client, ops)
        what = f"multi of {len(ops)} ops on"
        first = ops[0].path if ops else "/"
        raw = await self._wait(transaction.commit_async(), what, first)
        return self._multi_results(ops, raw)

    async def _pipelined(
        self, starts: Sequence[Callable[[], Any]], what: str
    ) -> list[tuple[Any, BaseException | None]]:
        """Run ``starts`` (each issues one kazoo async request) in a worker thread, every request
        sent before any answer is awaited; (value, error) per request. A request unanswered
        within ``request_timeout_ms`` of the batch's start fails the whole batch."""
        deadline_s = self.request_timeout_ms / 1000.0

        def run() -> list[tuple[Any, BaseException | None]]:
            started = time.monotonic()
            pending = [start() for start in starts]
            out: list[tuple[Any, BaseException | None]] = []
            for result in pending:
                try:
                    out.append((result.get(timeout=max(0.0, deadline_s - (time.monotonic() - started))), None))
                except KazooTimeoutError:
                    raise StoreUnavailableError(
                        f"ZooKeeper at {self.connect} did not answer a batch of {len(starts)} {what} "
                        f"within {self.request_timeout_ms} ms"
                    ) from None
                except Exception as e:
                    out.append((None, e))
            return out

        return await asyncio.to_thread(run)

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Every path's data and stat (None where the znode does not exist): in ``multiRead``
        requests of :data:`MULTI_READ_CHUNK` paths, pipelined (:mod:`.zookeeper_multi_read`),
        or one pipelined read per path from a server without ``multiRead``."""
        client = self._client_or_raise()
        checked = [validate_path(p) for p in paths]
        answers = await self._read_many(client, checked)
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for path, (value, error) in zip(checked, answers, strict=True):
            if error is None:
                data, stat = value
                out.append(((data or b""), _stat(stat)))
            elif isinstance(error, kz.NoNodeError):
                out.append(None)
            else:
                raise self._translate(error, "get", path)
        return out

    async def _read_many(self, client: KazooClient, paths: list[str]) -> list[tuple[Any, BaseException | None]]:
        """(value, error) per path: multiRead chunks, or single reads once the server refused one."""
        if self._multi_read and len(paths) > 1:
            chunks = [paths[i : i + MULTI_READ_CHUNK] for i in range(0, len(paths), MULTI_READ_CHUNK)]
            starts = [functools.partial(start_multi_read, client, chunk) for chunk in chunks]
            answers = await self._pipelined(starts, "multiRead requests")
            out: list[tuple[Any, BaseException | None]] = []
            for chunk, (entries, error) in zip(chunks, answers, strict=True):
                if isinstance(error, (kz.UnimplementedError, MalformedMultiReadError)):
                    log.warning(
                        "ZooKeeper at %s: multiRead failed (%s); reading one znode per request", self.connect, error
                    )
                    self._multi_read = False
                    return await self._read_many(client, paths)
                if error is not None:
                    out.extend((None, error) for _ in chunk)
                else:
                    out.extend((None, e) if isinstance(e, BaseException) else (e, None) for e in entries)
            return out
        return await self._pipelined([functools.partial(client.get_async, p) for p in paths], "reads")

    async def multi_many(
        self, transactions: Sequence[Sequence[Op]]
    ) -> list[list[str | ZnodeStat | None] | CoordinationError]:
        client = self._client_or_raise()
        built = [self._transaction(client, ops) for ops in transactions]
        answers = await self._pipelined([t.commit_async for t in built], "transactions")
        out: list[list[str | ZnodeStat | None] | CoordinationError] = []
        for ops, (raw, error) in zip(transactions, answers, strict=True):
            first = ops[0].path if ops else "/"
            try:
                if error is not None:
                    raise self._translate(error, "multi", first)
                out.append(self._multi_results(ops, raw))
            except StoreUnavailableError:
                raise
            except CoordinationError as e:
                out.append(e)
        return out

    async def close(self) -> None:
        """End the session (ephemeral nodes vanish at once) and stop kazoo's threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for watch in list(self._watches):
            watch.cancel()
        for session_watch in self._session_callbacks:
            session_watch.cancel()
        client, self._client = self._client, None
        if client is not None:
            client.remove_listener(self._kazoo_state_listener)
            await asyncio.to_thread(_stop_and_close, client)


def _stop_and_close(client: KazooClient) -> None:
    """End a kazoo client's session and free what it holds: ``stop`` ends its threads, ``close``
    its wake-up socket pair (which ``stop`` leaves open, for a restart), even when ``stop`` fails.
    Blocking (a kazoo thread is joined): off the event loop."""
    try:
        client.stop()
    finally:
        with contextlib.suppress(Exception):  # only a connection still running refuses
            client.close()
