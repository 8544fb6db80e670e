"""Persistent watches over ZooKeeper's one-shot ones, for :class:`~odradek.metadata.zookeeper.ZooKeeperStore`.

A :class:`ZkWatch` re-arms its one-shot kazoo watch on the event loop before calling its callback,
so no change goes unseen (events may coalesce); the store re-arms every watch after a reconnection
(kazoo drops them with the connection) and calls each callback once. A :class:`SessionWatch` is a
``watch_session`` registration.

Threading: :meth:`ZkWatch.kazoo_watcher` runs on a kazoo thread and only schedules onto the loop;
everything else runs on the store's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent

from odradek.metadata.errors import NoNodeError, StoreUnavailableError
from odradek.metadata.store import SessionState, WatchCallback, WatchHandle

if TYPE_CHECKING:
    from odradek.metadata.zookeeper import ZooKeeperStore

__all__ = ["SessionWatch", "ZkWatch"]

log = logging.getLogger("odradek.metadata.zookeeper")


class ZkWatch(WatchHandle):
    """A persistent children/data watch built from ZooKeeper's one-shot watches (loop side)."""

    def __init__(self, store: ZooKeeperStore, path: str, children: bool, callback: WatchCallback) -> None:
        self.store = store
        self.path = path
        self.children = children
        self.callback = callback
        self._cancelled = False
        self._need_arm = True
        self._need_callback = False
        self._task: asyncio.Task[None] | None = None
        self._first: Any = None

    def start(self, client: KazooClient) -> None:
        """Issue the first watch request now, so it precedes the caller's next read of ``path``."""
        w = self.kazoo_watcher
        if self.children:
            self._first = client.get_children_async(self.path, watch=w)
        else:
            self._first = client.exists_async(self.path, watch=w)
        self.trigger(True, False)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        self.store._watches.discard(self)

    def kazoo_watcher(self, event: WatchedEvent) -> None:
        """Runs on a kazoo thread: hand the event to the loop."""
        if self._cancelled or event.type == EventType.NONE:
            return  # NONE = connection lost; the store re-arms every watch on reconnection
        self.store._call_soon(self.trigger, True, True)

    def trigger(self, arm: bool, call: bool) -> None:
        if self._cancelled:
            return
        self._need_arm |= arm
        self._need_callback |= call
        if self._task is None or self._task.done():
            self._task = self.store._loop_or_raise().create_task(self._run())

    async def _run(self) -> None:
        while not self._cancelled and (self._need_arm or self._need_callback):
            if self._need_arm:
                self._need_arm = False
                try:
                    if await self._arm():
                        self._need_callback = True
                except StoreUnavailableError as e:
                    log.info("watch on %s not armed (%s); it is re-armed on reconnection", self.path, e)
                except Exception:
                    log.exception("cannot arm the watch on %s", self.path)
            if self._need_callback and not self._cancelled:
                self._need_callback = False
                try:
                    await self.callback(self.path)
                except Exception:
                    log.exception("watch callback %r for %s failed", self.callback, self.path)

    async def _arm(self) -> bool:
        """Set the one-shot watch; True if the node appeared meanwhile (a change to report)."""
        client = self.store._client_or_raise()
        w = self.kazoo_watcher
        first, self._first = self._first, None
        if not self.children:
            await self.store._wait(first or client.exists_async(self.path, watch=w), "watch", self.path)
            return False
        appeared = False
        while not self._cancelled:
            try:
                request = first or client.get_children_async(self.path, watch=w)
                first = None
                await self.store._wait(request, "watch", self.path)
                return appeared
            except NoNodeError:
                pass
            stat = await self.store._wait(client.exists_async(self.path, watch=w), "watch", self.path)
            if stat is None:
                return appeared
            appeared = True
        return False


class SessionWatch(WatchHandle):
    def __init__(self, callback: Callable[[SessionState], Awaitable[None]], owner: list[SessionWatch]) -> None:
        self.callback = callback
        self._owner = owner
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        if self in self._owner:
            self._owner.remove(self)
