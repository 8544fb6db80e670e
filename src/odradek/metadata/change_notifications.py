"""Kafka's ``ZkNodeChangeNotificationListener``: follow a folder of sequential notification znodes.

Writers create persistent sequential children ``<root>/<prefix><10 digits>`` after changing the
state they announce (``/config/changes/config_change_0000000003``, ``/kafka-acl-changes/
acl_changes_0000000012``). A listener watches ``<root>``'s children and, for every child whose
sequence number is above the highest it has processed (``last_executed_change``, -1 at start, so
every notice still present is processed once at start-up, as Kafka does), reads its data and calls
``handler(data)`` in sequence order. Each pass then purges the notices created more than
``change_expiration_ms`` (Kafka's 15 minutes) before the pass began; every listener purges, and a
notice already gone is skipped. A handler's exception is logged and the notice counts as processed
(Kafka's behaviour); a child whose name does not carry the prefix is ignored.

Passes are serialized (one at a time per listener) and re-run after a session expiry or
reconnection, when changes may have been missed. Loop-only, like the store.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable

from odradek.metadata.errors import NoNodeError
from odradek.metadata.store import CoordinationStore, SessionState, WatchHandle, join_path

__all__ = ["CHANGE_EXPIRATION_MS", "NotificationHandler", "ZkNodeChangeNotificationListener"]

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""How old a notice must be before a listener deletes it (Kafka's ``changeExpirationMs``)."""

NotificationHandler = Callable[[bytes], Awaitable[None] | None]
"""``handler(data)``: one notice's body; may be a coroutine function."""


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ZkNodeChangeNotificationListener:
    """Follows ``seq_node_root``; see the module docstring. ``clock_ms`` compares with znode ctimes."""

    def __init__(
        self,
        store: CoordinationStore,
        seq_node_root: str,
        seq_node_prefix: str,
        handler: NotificationHandler,
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.store = store
        self.seq_node_root = seq_node_root
        self.seq_node_prefix = seq_node_prefix
        self._handler = handler
        self.change_expiration_ms = change_expiration_ms
        self._clock_ms = clock_ms
        self.last_executed_change = -1
        self._lock = asyncio.Lock()
        self._watches: list[WatchHandle] = []
        self._closed = False

    async def init(self) -> None:
        """Arm the watches, then process every notice present."""
        self._watches.append(self.store.watch_children(self.seq_node_root, self._on_children))
        self._watches.append(self.store.watch_session(self._on_session))
        await self.process_notifications()

    async def close(self) -> None:
        self._closed = True
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()

    async def _on_children(self, _path: str) -> None:
        await self.process_notifications()

    async def _on_session(self, state: SessionState) -> None:
        if state is not SessionState.SUSPENDED:
            await self.process_notifications()

    def change_number(self, name: str) -> int | None:
        """The sequence number of a child name, None when it is not ``<prefix><digits>``."""
        digits = name[len(self.seq_node_prefix) :]
        if not name.startswith(self.seq_node_prefix) or not digits.isdigit():
            return None
        return int(digits)

    async def process_notifications(self) -> None:
        """One pass: new notices to the handler in order, then the purge of expired ones."""
        if self._closed:
            return
        async with self._lock:
            try:
                children = sorted(await self.store.get_children(self.seq_node_root))
            except NoNodeError:
                return
            now = self._clock_ms()
            numbered = [(n, c) for c in children if (n := self.change_number(c)) is not None]
            for number, child in sorted(numbered):
                if number > self.last_executed_change:
                    await self._process(child)
                    self.last_executed_change = number
            await self._purge(now, [c for _, c in numbered])

    async def _process(self, child: str) -> None:
        path = join_path(self.seq_node_root, child)
        try:
            data, _ = await self.store.get(path)
        except NoNodeError:
            log.warning("notification %s vanished before it was read", path)
            return
        try:
            result = self._handler(data)
            if inspect.isawaitable(result):
                await result
        except Exception:
            if self._closed:  # closed while the handler ran: its store may be gone, nothing to report
                log.debug("change notification %s dropped: the listener closed", path)
                return
            log.exception("error processing change notification %r from %s", data[:200], path)

    async def _purge(self, now: int, children: list[str]) -> None:
        for child in children:
            path = join_path(self.seq_node_root, child)
            stat = await self.store.exists(path)
            if stat is not None and now - stat.ctime > self.change_expiration_ms:
                try:
                    await self.store.delete(path)
                    log.debug("purged change notification %s", path)
                except NoNodeError:
                    pass
