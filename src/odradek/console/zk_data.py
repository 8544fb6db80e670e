"""What the console reads from ZooKeeper when ``--zookeeper`` is given: Kafka's znodes as the brokers wrote them.

- ``/controller`` (``{"brokerid": N, ...}``) and ``/controller_epoch``;
- ``/brokers/ids/<id>``: each broker's registration (endpoints, rack, its JSON version);
- ``/admin/reassign_partitions``: a reassignment submitted the ZooKeeper way, waiting for the controller;
- ``/admin/delete_topics``: topics marked for deletion and not yet gone.

Values are shown as the JSON they hold (at most :data:`MAX_ZNODE_BYTES` each), never trusted:
an unparsable znode is shown as text. The session (:class:`ZooKeeperStore`, kazoo) lives on the
console's client loop: :class:`ZooKeeperReader` opens it on first use and closes it with the
console. Call only on the client loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata.errors import NoNodeError
from odradek.metadata.store import CoordinationStore

__all__ = ["MAX_ZNODE_BYTES", "ZooKeeperReader", "ZooKeeperView"]

MAX_ZNODE_BYTES = 64 * 1024
MAX_CHILDREN = 1000


@dataclass
class ZooKeeperView:
    connect: str
    controller: Any = None
    controller_epoch: str | None = None
    brokers: list[tuple[str, Any]] = field(default_factory=list)
    pending_reassignment: Any = None
    pending_deletes: list[str] = field(default_factory=list)


def _decode(data: bytes) -> Any:
    text = data[:MAX_ZNODE_BYTES].decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


class ZooKeeperReader:
    """One lazily opened ZooKeeper session for the console."""

    def __init__(self, connect: str, timeout_ms: int = 10000) -> None:
        self.connect = connect
        self.timeout_ms = timeout_ms
        self._store: CoordinationStore | None = None

    async def _session(self) -> CoordinationStore:
        if self._store is None:
            from odradek.metadata.zookeeper import ZooKeeperStore

            store = ZooKeeperStore(
                self.connect, session_timeout_ms=self.timeout_ms, connection_timeout_ms=self.timeout_ms
            )
            await store.start()
            self._store = store
        return self._store

    async def _get(self, store: CoordinationStore, path: str) -> bytes | None:
        try:
            data, _ = await store.get(path)
        except NoNodeError:
            return None
        return data

    async def read(self) -> ZooKeeperView:
        store = await self._session()
        view = ZooKeeperView(self.connect)
        controller = await self._get(store, "/controller")
        view.controller = None if controller is None else _decode(controller)
        epoch = await self._get(store, "/controller_epoch")
        view.controller_epoch = None if epoch is None else epoch[:64].decode("utf-8", "replace")
        try:
            ids = sorted((await store.get_children("/brokers/ids"))[:MAX_CHILDREN], key=lambda i: (len(i), i))
        except NoNodeError:
            ids = []
        answers = await store.get_many([f"/brokers/ids/{i}" for i in ids])
        view.brokers = [(i, _decode(a[0])) for i, a in zip(ids, answers, strict=True) if a is not None]
        pending = await self._get(store, "/admin/reassign_partitions")
        view.pending_reassignment = None if pending is None else _decode(pending)
        try:
            view.pending_deletes = sorted(await store.get_children("/admin/delete_topics"))[:MAX_CHILDREN]
        except NoNodeError:
            pass
        return view

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None
