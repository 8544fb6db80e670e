"""Which registry instance writes: a ZooKeeper ephemeral znode, or the instance itself.

With a ZooKeeper given, every instance tries to create the ephemeral znode
``/schema_registry/schema_registry_master`` (Confluent's ZooKeeper-era path under its default
``schema_registry`` namespace) holding Confluent's identity JSON
``{"host":"h","port":8081,"master_eligibility":true,"scheme":"http","version":1}``; the one that
creates it leads until its session ends, the others watch it and forward writes to the URL it
names. Without ZooKeeper an instance is its own leader (Confluent's group-based election is not
implemented): run one writer per cluster, or give every instance the ZooKeeper.

Threading: one event loop; ``is_leader``/``leader_url`` are read by request handlers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from odradek.metadata.errors import CoordinationError, NodeExistsError, NoNodeError
from odradek.metadata.store import CoordinationStore, SessionState, WatchHandle

log = logging.getLogger(__name__)

LEADER_PATH = "/schema_registry/schema_registry_master"


def identity(url: str) -> bytes:
    parts = urlsplit(url)
    return json.dumps(
        {
            "host": parts.hostname or "",
            "port": parts.port or (443 if parts.scheme == "https" else 80),
            "master_eligibility": True,
            "scheme": parts.scheme or "http",
            "version": 1,
        },
        separators=(",", ":"),
    ).encode()


def url_of(data: bytes) -> str | None:
    """The URL named by a leader znode's identity JSON, or None if it does not decode."""
    try:
        obj = json.loads(data)
        return f"{obj.get('scheme', 'http')}://{obj['host']}:{int(obj['port'])}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class LeaderElector:
    """Standalone (``store`` None): always the leader. Otherwise the ZooKeeper election above.

    ``on_elected`` is awaited each time this instance becomes the leader, before
    :attr:`is_leader` turns true (the registry catches up with ``_schemas`` there).
    """

    def __init__(
        self,
        own_url: str,
        store: CoordinationStore | None = None,
        on_elected: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.own_url = own_url
        self.store = store
        self.on_elected = on_elected
        self.is_leader = store is None
        self.leader_url: str | None = own_url if store is None else None
        self._watches: list[WatchHandle] = []
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        if self.store is None:
            if self.on_elected is not None:
                await self.on_elected()
            return
        self._watches.append(self.store.watch_data(LEADER_PATH, self._changed))
        self._watches.append(self.store.watch_session(self._session))
        await self._elect()

    async def _changed(self, _path: str) -> None:
        await self._elect()

    async def _session(self, state: SessionState) -> None:
        if state != SessionState.CONNECTED:
            self.is_leader = False
        await self._elect()

    async def _elect(self) -> None:
        assert self.store is not None
        async with self._lock:
            try:
                try:
                    await self.store.create(LEADER_PATH, identity(self.own_url), ephemeral=True, makepath=True)
                except NodeExistsError:
                    pass
                data, stat = await self.store.get(LEADER_PATH)
            except NoNodeError:
                self.is_leader, self.leader_url = False, None
                asyncio.get_running_loop().call_later(0.1, lambda: asyncio.ensure_future(self._elect()))
                return
            except CoordinationError as e:
                log.warning("schema registry leader election: %s", e)
                self.is_leader, self.leader_url = False, None
                return
            mine = stat.ephemeral_owner == self.store.session_id
            was = self.is_leader
            if mine and not was:
                self.leader_url = None  # writes get UNKNOWN_LEADER until this instance has caught up
                if self.on_elected is not None:
                    await self.on_elected()
            self.leader_url = self.own_url if mine else url_of(data)
            self.is_leader = mine
            if mine != was:
                log.info("schema registry %s: leader is %s", self.own_url, self.leader_url)

    async def close(self) -> None:
        for w in self._watches:
            w.cancel()
        self.is_leader = False
