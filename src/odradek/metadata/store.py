"""The coordination store: ZooKeeper's data model behind one async interface.

Two implementations share this contract:

* :class:`~odradek.metadata.embedded.EmbeddedStore` sessions: an in-process tree (persistent nodes
  kept in the broker's data dir), for single-process clusters and tests;
* :class:`~odradek.metadata.zookeeper.ZooKeeperStore`: a real ZooKeeper ensemble through kazoo.

Data model (ZooKeeper's): a tree of znodes named by absolute slash-separated paths (``/brokers/ids/1``;
no trailing slash, no empty, ``.`` or ``..`` segment; ``/`` always exists). Each znode has ``bytes``
data and a :class:`ZnodeStat`. ``version`` starts at 0 and grows by one on every ``set``;
a ``version`` argument of ``-1`` (:data:`ANY_VERSION`) matches any version. An *ephemeral* node
belongs to the session that created it, cannot have children, and is deleted when that session
ends (``close()``, or expiry for ZooKeeper). A *sequential* create appends a 10-digit,
zero-padded counter kept by the parent (``/config/changes/config_change_0000000007``).

Watches are persistent (like kazoo's ``ChildrenWatch``/``DataWatch``, not ZooKeeper's one-shot
triggers): ``watch_children(path, cb)`` calls ``await cb(path)`` after every change of the set of
``path``'s children and when ``path`` itself is created or deleted; ``watch_data(path, cb)`` after
every create, set or delete of ``path``. A watch covers the changes made after it is armed, and it
is armed before the next request of the same session is served, so the usual pattern
``watch_children(p, cb)`` then ``await get_children(p)`` misses nothing: a change is either in what
the read returns or reported to ``cb`` (possibly both). Callbacks run on the event loop that uses
the store, carry only the path (re-read the state: events may be coalesced, and after a ZooKeeper
reconnection every watch fires once because changes may have been missed), are never called after
``handle.cancel()``, and are not called at registration. An exception in a callback is logged and
otherwise ignored.

Threading: every method is called from one asyncio event loop (the broker's); none is thread-safe.
"""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from odradek.metadata.errors import (
    BadVersionError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)

__all__ = [
    "ANY_VERSION",
    "BadVersionError",
    "CheckVersionOp",
    "CoordinationError",
    "CoordinationStore",
    "CreateOp",
    "DeleteOp",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "SessionCallback",
    "SessionState",
    "SetDataOp",
    "StoreUnavailableError",
    "WatchCallback",
    "WatchHandle",
    "ZnodeStat",
    "join_path",
    "parent_path",
    "validate_path",
]

ANY_VERSION = -1
"""A ``version`` argument that matches every version (ZooKeeper's -1)."""

WatchCallback = Callable[[str], Awaitable[None]]
"""``async def callback(path: str) -> None``: something changed at ``path``; re-read it."""


class SessionState(enum.Enum):
    """Session events delivered to ``watch_session`` callbacks."""

    SUSPENDED = "suspended"
    """Connection to ZooKeeper lost; the session (and its ephemeral nodes) may still be alive."""
    CONNECTED = "connected"
    """Connected again after SUSPENDED, same session: ephemeral nodes are intact."""
    EXPIRED = "expired"
    """The session ended without ``close()``: its ephemeral nodes are gone. A new session has
    replaced it (see ``session_id``); re-register ephemeral nodes (broker id, controller)."""


SessionCallback = Callable[[SessionState], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    """ZooKeeper's ``Stat`` (the fields Kafka uses). Times are milliseconds since the epoch."""

    version: int
    """Data version: 0 at creation, +1 at every set."""
    cversion: int
    """Children version: +1 at every create or delete of a child."""
    ctime: int
    mtime: int
    ephemeral_owner: int
    """Session id that owns this ephemeral node; 0 for a persistent node."""
    num_children: int
    data_length: int
    czxid: int = 0
    """The zxid of the transaction that created the node (Kafka's broker epoch is the czxid of the
    broker's ``/brokers/ids/<id>`` registration). The embedded store numbers creations from a
    counter started at its open time in microseconds, so a later creation has a larger one."""


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckVersionOp:
    """Fails the whole ``multi`` unless ``path`` is at ``version`` (Kafka's controller-epoch fencing)."""

    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckVersionOp


class WatchHandle(abc.ABC):
    """A registered watch; ``cancel()`` stops it (idempotent, callable from the loop only)."""

    @abc.abstractmethod
    def cancel(self) -> None: ...

    @property
    @abc.abstractmethod
    def cancelled(self) -> bool: ...


class CoordinationStore(abc.ABC):
    """One session with the coordination service. See the module docstring for the data model."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id (nonzero); it changes after an EXPIRED session event."""

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create ``path`` and return the created path (with the sequence suffix if ``sequential``).

        ``makepath`` creates missing ancestors as persistent empty nodes. Raises
        :class:`NodeExistsError`, :class:`NoNodeError` (parent missing, ``makepath`` false),
        :class:`NoChildrenForEphemeralsError`.
        """

    @abc.abstractmethod
    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        """Data and stat of ``path``; :class:`NoNodeError` if missing."""

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> ZnodeStat:
        """Replace the data if the version matches; returns the new stat.

        Raises :class:`NoNodeError` or :class:`BadVersionError`.
        """

    @abc.abstractmethod
    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        """Delete ``path`` (and, if ``recursive``, its subtree, children first).

        Raises :class:`NoNodeError`, :class:`BadVersionError`, :class:`NotEmptyError`. Deleting ``/``
        is refused with ``ValueError``.
        """

    @abc.abstractmethod
    async def exists(self, path: str) -> ZnodeStat | None:
        """The stat of ``path``, or None if it does not exist."""

    @abc.abstractmethod
    async def get_children(self, path: str) -> list[str]:
        """Names (not paths) of the children of ``path``, sorted; :class:`NoNodeError` if missing."""

    @abc.abstractmethod
    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        """Call ``callback(path)`` after every change of ``path``'s children or existence.

        ``path`` need not exist yet. Must be called from the loop.
        """

    @abc.abstractmethod
    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        """Call ``callback(path)`` after every create, set or delete of ``path`` (need not exist)."""

    @abc.abstractmethod
    def watch_session(self, callback: SessionCallback) -> WatchHandle:
        """Call ``callback(state)`` on session events (:class:`SessionState`)."""

    @abc.abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[str | ZnodeStat | None]:
        """Apply ``ops`` atomically: all or none (ZooKeeper's multi).

        Returns one result per op: the created path for :class:`CreateOp`, the new stat for
        :class:`SetDataOp`, None for :class:`DeleteOp` and :class:`CheckVersionOp`. On failure
        raises the error of the first failing op and changes nothing.
        """

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Read many znodes at once: one entry per path, in order, None where the znode does not
        exist; any other error raises as :meth:`get` does. ZooKeeper's implementation pipelines the
        reads (every request written before the first answer is awaited, as Kafka's
        ``KafkaZkClient.retryRequestsUntilConnected`` does) from a worker thread, so a read of
        thousands of partition states neither holds the event loop nor wakes it once per znode;
        this default reads them concurrently."""

        async def one(path: str) -> tuple[bytes, ZnodeStat] | None:
            try:
                return await self.get(path)
            except NoNodeError:
                return None

        return list(await asyncio.gather(*(one(p) for p in paths)))

    async def multi_many(
        self, transactions: Sequence[Sequence[Op]]
    ) -> list[list[str | ZnodeStat | None] | CoordinationError]:
        """Apply independent transactions, each atomically as :meth:`multi` does: one entry per
        transaction, in order: its results, or the error it failed with (nothing of that one
        applied; the others are not affected). :class:`StoreUnavailableError` (the session lost)
        raises for the whole call, since which transactions were applied is then unknown. Pipelined
        like :meth:`get_many` in ZooKeeper's implementation; this default runs them concurrently."""

        async def one(ops: Sequence[Op]) -> list[str | ZnodeStat | None] | CoordinationError:
            try:
                return await self.multi(ops)
            except StoreUnavailableError:
                raise
            except CoordinationError as e:
                return e

        return list(await asyncio.gather(*(one(t) for t in transactions)))

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session: its ephemeral nodes vanish and watchers fire. Idempotent.

        Every later call raises :class:`StoreUnavailableError`.
        """

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors as persistent empty nodes; no-op if present."""
        if await self.exists(path) is not None:
            return
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    async def __aenter__(self) -> CoordinationStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def validate_path(path: str) -> str:
    """Return ``path`` if it is a valid absolute znode path, else raise ``ValueError``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"znode path must be an absolute path starting with '/': {path!r}")
    if path == "/":
        return path
    if path.endswith("/"):
        raise ValueError(f"znode path must not end with '/': {path!r}")
    for segment in path[1:].split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(f"znode path has an empty, '.' or '..' segment: {path!r}")
        if "\x00" in segment:
            raise ValueError(f"znode path contains a NUL character: {path!r}")
    return path


def parent_path(path: str) -> str:
    """``/a/b`` -> ``/a``; ``/a`` -> ``/``; ``/`` -> ``/``."""
    index = path.rfind("/")
    return "/" if index <= 0 else path[:index]


def join_path(parent: str, child: str) -> str:
    return parent + child if parent.endswith("/") else f"{parent}/{child}"
