"""The embedded coordination store: ZooKeeper's data model in process, persistent nodes on disk.

``store = EmbeddedStore(metadata_dir)`` holds one znode tree; ``store.session()`` opens a
:class:`~odradek.metadata.store.CoordinationStore` session for one broker. Several brokers in one
process share the tree through their own sessions; each session's ephemeral nodes
(``/brokers/ids/<id>``, ``/controller``) vanish, and the watches of every session fire, when it
closes (``await session.close()``) or is expired (``await session.expire()``, a test hook that
imitates a ZooKeeper session expiry: new session id, ``SessionState.EXPIRED`` delivered).

Semantics follow ZooKeeper: versions, cversion-based 10-digit sequence suffixes, no children under
ephemeral nodes, root ``/`` always present. Differences: ``delete(recursive=True)`` and every other
call are atomic; nothing is ever unavailable while the session is open.

Persistence: with a ``metadata_dir`` (the broker passes ``<log.dirs[0]>/metadata``; it is created
if missing), every change of a persistent node is in ``<metadata_dir>/znodes.json``, written
atomically and durably, before the call that made it returns (format and crash policy:
:mod:`odradek.metadata.snapshot`). The directory is locked (``flock`` on ``znodes.lock``) so two
processes cannot own one tree; ``read_only=True`` (used by ``odradek zk --data-dir``) neither locks
nor writes and sees the persistent nodes only. Without a ``metadata_dir`` the tree lives in memory
only.

Group commit: a change is applied to the tree at once (so a later call of any session sees it, as
ZooKeeper's leader applies in order) and queued; one writer thread (``znodes-writer``) rewrites the
whole snapshot for every change queued since its last write, and only then are the queued changes'
watches fired, in order, and their callers resumed. A thousand topic creations in one request cost
one or two snapshot writes, not a thousand, and the event loop never waits on an fsync. A change
that touches only ephemeral nodes is notified at once when nothing is queued, else behind the
queued ones (watch events keep the order of the changes). If a snapshot write fails (disk full,
I/O error), the store is *failed*, as a ZooKeeper server that cannot write its transaction log
stops: the callers waiting on that write and every later write get
:class:`~odradek.metadata.errors.StoreUnavailableError`, the error is logged, and a restart reloads
the last snapshot written.

Threading: one asyncio event loop drives the store and all its sessions; watch callbacks are
tasks on that loop; the writer thread only encodes and writes a copy of the lines it is handed.
Nothing else here is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from odradek.metadata.errors import (
    BadVersionError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)
from odradek.metadata.snapshot import NodeRecord, encode_record, read_snapshot, snapshot_path, write_snapshot_lines
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
    parent_path,
    validate_path,
)

__all__ = ["EmbeddedSession", "EmbeddedStore"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Node:
    data: bytes
    version: int
    cversion: int
    ctime: int
    mtime: int
    ephemeral_owner: int
    children: set[str] = field(default_factory=set)
    czxid: int = 0

    def copy(self) -> _Node:
        return _Node(
            self.data,
            self.version,
            self.cversion,
            self.ctime,
            self.mtime,
            self.ephemeral_owner,
            set(self.children),
            self.czxid,
        )

    def stat(self) -> ZnodeStat:
        return ZnodeStat(
            version=self.version,
            cversion=self.cversion,
            ctime=self.ctime,
            mtime=self.mtime,
            ephemeral_owner=self.ephemeral_owner,
            num_children=len(self.children),
            data_length=len(self.data),
            czxid=self.czxid,
        )


class _Watch(WatchHandle):
    def __init__(self, callback: Callable[..., Awaitable[None]], on_cancel: Callable[[_Watch], None]) -> None:
        self.callback = callback
        self._on_cancel = on_cancel
        self._cancelled = False

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._on_cancel(self)

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class _Change:
    """Undo journal and event list of one (possibly multi-op) mutation."""

    def __init__(self) -> None:
        self.saved: dict[str, _Node | None] = {}
        self.events: dict[tuple[str, str], None] = {}  # ordered set of (kind, path)
        self.persistent = False


def _write_sorted(path: Path, lines: dict[str, str]) -> None:
    """The writer thread's job: the snapshot of ``lines`` (znode path -> encoded record) in path order."""
    write_snapshot_lines(path, [lines[p] for p in sorted(lines)])


def _line(path: str, n: _Node) -> str:
    return encode_record(NodeRecord(path, n.data, n.version, n.cversion, n.ctime, n.mtime))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class EmbeddedStore:
    """The shared tree; see the module docstring. Open sessions with :meth:`session`."""

    def __init__(self, metadata_dir: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
        self.metadata_dir = Path(metadata_dir) if metadata_dir is not None else None
        self.read_only = read_only
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0)}
        self._data_watches: dict[str, list[_Watch]] = {}
        self._child_watches: dict[str, list[_Watch]] = {}
        self._sessions: dict[int, EmbeddedSession] = {}
        self._session_ids = itertools.count(1)
        self._zxids = itertools.count(time.time_ns() // 1000)
        """Creation zxids (``czxid``): increasing within a store and across its restarts."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock_file: IO[bytes] | None = None
        self._snapshot: Path | None = None
        self._lines: dict[str, str] = {}  # persistent znode path -> its line in the last snapshot written
        self._dirty: set[str] = set()  # znodes changed since then (an ephemeral create bumps its parent)
        self._queued: list[_Change] = []  # applied, waiting for the next snapshot write (or behind one)
        self._next_write: asyncio.Future[None] | None = None  # resolved once the queued changes are durable
        self._writing = False  # a write (or its notifications) is in progress
        self._writer: ThreadPoolExecutor | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None  # a failed snapshot write: no write is accepted any more
        if self.metadata_dir is not None:
            self._snapshot = snapshot_path(self.metadata_dir)
            if not read_only:
                self._snapshot.parent.mkdir(parents=True, exist_ok=True)
                self._lock()
            self._load(read_snapshot(self._snapshot, remove_torn_tmp=not read_only))
            self._lines = {path: _line(path, n) for path, n in self._nodes.items()}

    def __repr__(self) -> str:
        where = str(self._snapshot) if self._snapshot else "memory"
        return f"EmbeddedStore({where}, {len(self._nodes)} znodes, {len(self._sessions)} sessions)"

    # -- lifecycle -----------------------------------------------------------------------------------

    def session(self) -> EmbeddedSession:
        """Open a new session (one per broker)."""
        session = EmbeddedSession(self, next(self._session_ids))
        self._sessions[session.session_id] = session
        return session

    async def close(self) -> None:
        """Close every open session, wait for the queued changes to be written, stop the writer
        thread and release the data-dir lock. Idempotent."""
        for session in list(self._sessions.values()):
            await session.close()
        if self._flusher is not None:
            await asyncio.shield(self._flusher)
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _lock(self) -> None:
        assert self._snapshot is not None
        lock_path = self._snapshot.with_name("znodes.lock")
        f = open(lock_path, "ab")  # noqa: SIM115 - held for the store's lifetime
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise StoreUnavailableError(
                f"Embedded metadata store {lock_path.parent} is locked by another process "
                "(another broker using the same data dir?)"
            ) from None
        self._lock_file = f

    def _load(self, records: list[NodeRecord] | None) -> None:
        if not records:
            return
        for r in sorted(records, key=lambda r: (r.path.count("/"), r.path) if r.path != "/" else (0, "")):
            node = _Node(r.data, r.version, r.cversion, r.ctime, r.mtime, 0)
            if r.path == "/":
                self._nodes["/"] = node
                continue
            parent = self._nodes.get(parent_path(r.path))
            if parent is None:
                assert self._snapshot is not None
                raise CoordinationError(
                    f"Embedded metadata snapshot {self._snapshot} holds {r.path} without its parent"
                )
            parent.children.add(r.path.rsplit("/", 1)[1])
            self._nodes[r.path] = node

    def _cut_lines(self) -> dict[str, str]:
        """The snapshot's lines as of now: the last written ones with the znodes changed since
        re-encoded (each change's undo journal names every znode it touched). Clears the dirty set."""
        lines = dict(self._lines)
        for path in self._dirty:
            n = self._nodes.get(path)
            if n is None or n.ephemeral_owner != 0:
                lines.pop(path, None)
            else:
                lines[path] = _line(path, n)
        self._dirty.clear()
        return lines

    def _commit(self, changes: Sequence[_Change]) -> asyncio.Future[None] | None:
        """Queue applied ``changes`` for the next snapshot write; the future to await before the
        call that made them returns (``None``: nothing to wait for, the watches already fired)."""
        persistent = any(c.persistent for c in changes)
        if self._snapshot is None or self.read_only or not (persistent or self._queued or self._writing):
            for change in changes:
                self._notify(change.events)
            return None
        self._queued.extend(changes)
        loop = asyncio.get_running_loop()
        if self._next_write is None:
            self._next_write = loop.create_future()
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush(), name="znodes-writer")
        return self._next_write

    async def _flush(self) -> None:
        """Write the snapshot for every queued change, then fire their watches and resume their
        callers; again while changes were queued meanwhile. Runs as one task on the store's loop."""
        loop = asyncio.get_running_loop()
        while self._queued:
            batch, done = self._queued, self._next_write
            self._queued, self._next_write = [], None
            self._writing = True
            try:
                if self._failed is None and any(c.persistent for c in batch):
                    assert self._snapshot is not None
                    lines = self._cut_lines()
                    if self._writer is None:
                        self._writer = ThreadPoolExecutor(1, thread_name_prefix="znodes-writer")
                    try:
                        await loop.run_in_executor(self._writer, _write_sorted, self._snapshot, lines)
                    except Exception as e:
                        self._failed = e
                        log.error(
                            "embedded metadata store: writing %s failed, no further change is accepted "
                            "(restart the broker to reload the last snapshot): %s",
                            self._snapshot,
                            e,
                        )
                    else:
                        self._lines = lines
                if self._failed is not None:
                    if done is not None and not done.done():
                        done.set_exception(self._unavailable())
                    continue
                for change in batch:
                    self._notify(change.events)
                if done is not None and not done.done():
                    done.set_result(None)
            finally:
                self._writing = False

    def _unavailable(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"Embedded metadata store {self._snapshot} failed to write its snapshot: {self._failed}"
        )

    async def _durable(self, pending: asyncio.Future[None] | None) -> None:
        """Wait until a change queued by :meth:`_commit` is written (raises if the write failed)."""
        if pending is not None:
            await asyncio.shield(pending)

    # -- tree primitives (synchronous, journaled) -----------------------------------------------------

    def _save(self, change: _Change, path: str) -> None:
        if path not in change.saved:
            node = self._nodes.get(path)
            change.saved[path] = node.copy() if node is not None else None

    def _rollback(self, change: _Change) -> None:
        for path, node in change.saved.items():
            if node is None:
                self._nodes.pop(path, None)
            else:
                self._nodes[path] = node

    def _check_writable(self) -> None:
        if self._failed is not None:
            raise self._unavailable()
        if self.read_only:
            raise CoordinationError(f"Embedded metadata store in {self.metadata_dir} is open read-only")

    def _create(self, change: _Change, owner: int, op: CreateOp, makepath: bool) -> str:
        self._check_writable()
        path = validate_path(op.path)
        if path == "/":
            raise NodeExistsError.at(path)
        parent_name = parent_path(path)
        if parent_name not in self._nodes:
            if not makepath:
                raise NoNodeError(f"Cannot create {path}: parent {parent_name} does not exist", path)
            self._create(change, owner, CreateOp(parent_name), makepath=True)
        parent = self._nodes[parent_name]
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError.at(parent_name)
        if op.sequential:
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise NodeExistsError.at(path)
        self._save(change, parent_name)
        self._save(change, path)
        now = _now_ms()
        owner_id = owner if op.ephemeral else 0
        self._nodes[path] = _Node(bytes(op.data), 0, 0, now, now, owner_id, czxid=next(self._zxids))
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        change.events.update({("data", path): None, ("children", path): None, ("children", parent_name): None})
        change.persistent = change.persistent or owner_id == 0
        return path

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError.at(path)
        return node

    def _set(self, change: _Change, op: SetDataOp) -> ZnodeStat:
        self._check_writable()
        node = self._node(op.path)
        if op.version != ANY_VERSION and op.version != node.version:
            raise BadVersionError.at(op.path, op.version)
        self._save(change, op.path)
        node.data = bytes(op.data)
        node.version += 1
        node.mtime = _now_ms()
        change.events[("data", op.path)] = None
        change.persistent = change.persistent or node.ephemeral_owner == 0
        return node.stat()

    def _delete(self, change: _Change, path: str, version: int, recursive: bool) -> None:
        self._check_writable()
        if validate_path(path) == "/":
            raise ValueError("the root znode / cannot be deleted")
        node = self._node(path)
        if version != ANY_VERSION and version != node.version:
            raise BadVersionError.at(path, version)
        if node.children:
            if not recursive:
                raise NotEmptyError.at(path)
            for child in sorted(node.children):
                self._delete(change, join_path(path, child), ANY_VERSION, True)
        parent_name = parent_path(path)
        self._save(change, parent_name)
        self._save(change, path)
        parent = self._nodes[parent_name]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        del self._nodes[path]
        change.events.update({("data", path): None, ("children", path): None, ("children", parent_name): None})
        change.persistent = change.persistent or node.ephemeral_owner == 0

    def _apply(self, change: _Change, fn: Callable[[], object]) -> tuple[object, asyncio.Future[None] | None]:
        """Run ``fn`` (one or more primitives); undo everything on error, else queue the change
        (:meth:`_commit`). Returns ``fn``'s result and the future to pass to :meth:`_durable`."""
        try:
            result = fn()
        except BaseException:
            self._rollback(change)
            raise
        self._dirty.update(change.saved)
        return result, self._commit([change])

    def _apply_many(
        self, runs: Sequence[tuple[_Change, Callable[[], object]]]
    ) -> tuple[list[object], asyncio.Future[None] | None]:
        """Each run applied on its own, as :meth:`_apply` (one failing with a CoordinationError is
        undone and its error is its result; the others stay), all queued together: one snapshot
        write for the batch, the watches notified after it. Any other error undoes every run and
        raises."""
        out: list[object] = []
        done: list[_Change] = []
        try:
            for change, fn in runs:
                try:
                    out.append(fn())
                except CoordinationError as e:
                    self._rollback(change)
                    out.append(e)
                    continue
                except BaseException:
                    self._rollback(change)
                    raise
                done.append(change)
                self._dirty.update(change.saved)
        except BaseException:
            for change in reversed(done):
                self._rollback(change)
            raise
        return out, self._commit(done)

    # -- watches -------------------------------------------------------------------------------------

    def _add_watch(self, table: dict[str, list[_Watch]], path: str, callback: WatchCallback) -> _Watch:
        validate_path(path)

        def remove(watch: _Watch) -> None:
            watches = table.get(path, [])
            if watch in watches:
                watches.remove(watch)
            if not watches:
                table.pop(path, None)

        watch = _Watch(callback, remove)
        table.setdefault(path, []).append(watch)
        return watch

    def _notify(self, events: dict[tuple[str, str], None]) -> None:
        for kind, path in events:
            table = self._data_watches if kind == "data" else self._child_watches
            for watch in list(table.get(path, ())):
                self._spawn(watch, path)

    def _spawn(self, watch: _Watch, arg: object) -> None:
        async def run() -> None:
            if watch.cancelled:
                return
            try:
                await watch.callback(arg)
            except StoreUnavailableError as e:
                if not watch.cancelled:  # else its session closed while it ran (a write yields now)
                    log.exception("watch callback %r for %s failed", watch.callback, arg)
                else:
                    log.debug("watch callback %r for %s ended with its session: %s", watch.callback, arg, e)
            except Exception:
                log.exception("watch callback %r for %s failed", watch.callback, arg)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _end_session(self, session_id: int) -> None:
        change = _Change()
        owned = [p for p, n in self._nodes.items() if n.ephemeral_owner == session_id]
        for path in sorted(owned, reverse=True):
            if path in self._nodes:
                self._delete(change, path, ANY_VERSION, recursive=False)
        _, pending = self._apply(change, lambda: None)
        with contextlib.suppress(StoreUnavailableError):  # logged by the writer; the session ends anyway
            await self._durable(pending)

    def iter_tree(self, path: str = "/") -> Iterator[tuple[str, bytes, ZnodeStat]]:
        """Depth-first (children sorted) ``(path, data, stat)`` of the subtree at ``path``.

        A synchronous read for tools; :class:`NoNodeError` if ``path`` is missing.
        """
        node = self._node(path)
        yield path, node.data, node.stat()
        for child in sorted(node.children):
            yield from self.iter_tree(join_path(path, child))


class EmbeddedSession(CoordinationStore):
    """One broker's session on an :class:`EmbeddedStore` (create it with ``store.session()``)."""

    def __init__(self, store: EmbeddedStore, session_id: int) -> None:
        self._store = store
        self._session_id = session_id
        self._closed = False
        self._watches: list[_Watch] = []
        self._session_watches: list[_Watch] = []

    def __repr__(self) -> str:
        return f"EmbeddedSession(0x{self._session_id:x}{', closed' if self._closed else ''})"

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def store(self) -> EmbeddedStore:
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailableError(f"Embedded store session 0x{self._session_id:x} is closed")

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        self._check_open()
        change = _Change()
        op = CreateOp(path, data, ephemeral, sequential)
        result, pending = self._store._apply(
            change, lambda: self._store._create(change, self._session_id, op, makepath)
        )
        await self._store._durable(pending)
        assert isinstance(result, str)
        return result

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        self._check_open()
        node = self._store._node(path)
        return node.data, node.stat()

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> ZnodeStat:
        self._check_open()
        change = _Change()
        result, pending = self._store._apply(change, lambda: self._store._set(change, SetDataOp(path, data, version)))
        await self._store._durable(pending)
        assert isinstance(result, ZnodeStat)
        return result

    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        self._check_open()
        change = _Change()
        _, pending = self._store._apply(change, lambda: self._store._delete(change, path, version, recursive))
        await self._store._durable(pending)

    async def exists(self, path: str) -> ZnodeStat | None:
        self._check_open()
        node = self._store._nodes.get(validate_path(path))
        return node.stat() if node is not None else None

    async def get_children(self, path: str) -> list[str]:
        self._check_open()
        return sorted(self._store._node(path).children)

    def _track(self, watch: _Watch) -> _Watch:
        self._watches.append(watch)
        return watch

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        self._check_open()
        return self._track(self._store._add_watch(self._store._child_watches, path, callback))

    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        self._check_open()
        return self._track(self._store._add_watch(self._store._data_watches, path, callback))

    def watch_session(self, callback: SessionCallback) -> WatchHandle:
        self._check_open()
        watches = self._session_watches
        watch = _Watch(callback, lambda w: watches.remove(w) if w in watches else None)
        watches.append(watch)
        return watch

    def _run_multi(self, change: _Change, ops: Sequence[Op]) -> list[str | ZnodeStat | None]:
        store = self._store
        results: list[str | ZnodeStat | None] = []
        for op in ops:
            if isinstance(op, CreateOp):
                results.append(store._create(change, self._session_id, op, makepath=False))
            elif isinstance(op, SetDataOp):
                results.append(store._set(change, op))
            elif isinstance(op, DeleteOp):
                store._delete(change, op.path, op.version, recursive=False)
                results.append(None)
            elif isinstance(op, CheckVersionOp):
                node = store._node(op.path)
                if node.version != op.version:
                    raise BadVersionError.at(op.path, op.version)
                results.append(None)
            else:
                raise TypeError(f"not a multi op: {op!r}")
        return results

    async def multi(self, ops: Sequence[Op]) -> list[str | ZnodeStat | None]:
        self._check_open()
        change = _Change()
        results, pending = self._store._apply(change, lambda: self._run_multi(change, ops))
        await self._store._durable(pending)
        assert isinstance(results, list)
        return results

    async def multi_many(
        self, transactions: Sequence[Sequence[Op]]
    ) -> list[list[str | ZnodeStat | None] | CoordinationError]:
        """As the contract says, with one snapshot write for the whole batch."""
        self._check_open()
        runs: list[tuple[_Change, Callable[[], object]]] = []
        for ops in transactions:
            change = _Change()
            runs.append((change, functools.partial(self._run_multi, change, ops)))
        results, pending = self._store._apply_many(runs)
        await self._store._durable(pending)
        return cast(list[list[str | ZnodeStat | None] | CoordinationError], results)

    async def expire(self) -> None:
        """Imitate a ZooKeeper session expiry (a test hook).

        The ephemeral nodes of the current session vanish (watches fire), the session gets a new
        id, and ``watch_session`` callbacks receive :attr:`SessionState.EXPIRED`. The session stays
        usable, like a kazoo client that reconnected with a new session.
        """
        self._check_open()
        store = self._store
        old = self._session_id
        store._sessions.pop(old, None)
        self._session_id = next(store._session_ids)
        store._sessions[self._session_id] = self
        await store._end_session(old)
        for watch in list(self._session_watches):
            store._spawn(watch, SessionState.EXPIRED)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watch in self._watches + self._session_watches:
            watch.cancel()
        self._watches.clear()
        self._store._sessions.pop(self._session_id, None)
        await self._store._end_session(self._session_id)
