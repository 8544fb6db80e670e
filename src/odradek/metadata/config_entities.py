"""The ``/config`` entities, written as Kafka's ``AdminZkClient`` writes them, and followed as its
``ZkConfigManager`` follows them.

Entities (``entity_type`` / ``entity_name``)::

    topics/<topic>                    brokers/<id> and brokers/<default>
    clients/<client id>               users/<user>          users/<user>/clients/<client id>
    ips/<ip>                          (``<default>`` is the default entity of users, clients, ips)
    groups/<group id>                 (Kafka 4's group configs)

User principals, client ids and group ids are *sanitized* into znode names (:func:`sanitize`, Kafka's
``Sanitizer``: URL-encoding, ``*`` as ``%2A``, space as ``%20``). Each entity's znode holds one JSON
map ``{"version":1,"config":{...}}`` shared by several writers (SCRAM credentials and quotas both
live under ``/config/users/<user>``), so :func:`alter_entity_config` never replaces the map: it
reads the znode with its version, applies the keys to set and to delete, and writes conditionally on
that version, re-reading and re-applying when another writer got there first. A ``users``,
``clients`` or ``ips`` entity left with no keys and no children is deleted, with the
``users/<u>/clients`` folder and the ``users/<u>`` node when they become empty too (Kafka's
``tryCleanQuotaNodes``); a topic or broker keeps an empty map. Every write is followed by a
notification ``/config/changes/config_change_<seq>`` = ``{"version":2,"entity_path":"users/alice"}``.

:class:`ZkConfigManager` follows ``/config/changes`` (through
:class:`~odradek.metadata.change_notifications.ZkNodeChangeNotificationListener`) and calls the
handler registered for the changed entity's root type with the entity name (``alice`` or
``alice/clients/app``) and its whole config as read after the notice. Version 1 notices
(``{"version":1,"entity_type":"topics","entity_name":"t"}``) are understood for topics and clients.
At start-up every existing entity of a handled type is passed to its handler once.
Loop-only, like the store.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from odradek.errors import InvalidConfigError
from odradek.metadata.change_notifications import CHANGE_EXPIRATION_MS, ZkNodeChangeNotificationListener
from odradek.metadata.config_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ConfigType,
)
from odradek.metadata.errors import BadVersionError, CoordinationError, NodeExistsError, NoNodeError, NotEmptyError
from odradek.metadata.store import CoordinationStore, parent_path

__all__ = [
    "DEFAULT_ENTITY",
    "ConfigHandler",
    "ZkConfigManager",
    "alter_entity_config",
    "create_config_change_notification",
    "desanitize",
    "fetch_all_child_entity_configs",
    "fetch_all_entity_configs",
    "fetch_entity_config",
    "sanitize",
]

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"
"""The default entity's name (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``)."""

QUOTA_ENTITY_TYPES = frozenset({ConfigType.USER, ConfigType.CLIENT, ConfigType.IP})
MAX_WRITE_ATTEMPTS = 100

ConfigHandler = Callable[[str, dict[str, str]], Awaitable[None] | None]
"""``handler(entity_name, config)``: the entity's whole config after a change; may be async."""

_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's ``URLEncoder`` (UTF-8, upper-case hex), ``*`` -> ``%2A``,
    space -> ``%20`` (``User:a b*`` -> ``User%3Aa%20b%2A``)."""
    out = []
    for char in name:
        if char in _UNRESERVED:
            out.append(char)
        else:
            out.extend(f"%{b:02X}" for b in char.encode("utf-8"))
    return "".join(out)


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's ``URLDecoder``: ``+`` is a space)."""
    from urllib.parse import unquote_plus

    return unquote_plus(name, encoding="utf-8", errors="strict")


async def _read(store: CoordinationStore, entity_type: str, entity_name: str) -> tuple[dict[str, str], int | None]:
    """The entity's config and znode version (None: no znode)."""
    try:
        data, stat = await store.get(ConfigEntityZNode.path(entity_type, entity_name))
    except NoNodeError:
        return {}, None
    return ConfigEntityZNode.decode(entity_type, entity_name, data), stat.version


async def fetch_entity_config(store: CoordinationStore, entity_type: str, entity_name: str) -> dict[str, str]:
    """``AdminZkClient.fetchEntityConfig``: the entity's keys, empty when it has no znode."""
    return (await _read(store, entity_type, entity_name))[0]


async def _children(store: CoordinationStore, path: str) -> list[str]:
    try:
        return await store.get_children(path)
    except NoNodeError:
        return []


async def fetch_all_entity_configs(store: CoordinationStore, entity_type: str) -> dict[str, dict[str, str]]:
    """Every ``/config/<entity_type>/<name>`` and its keys, by (sanitized) name."""
    out = {}
    for name in await _children(store, ConfigEntityTypeZNode.path(entity_type)):
        out[name] = await fetch_entity_config(store, entity_type, name)
    return out


async def fetch_all_child_entity_configs(
    store: CoordinationStore, root_type: str, child_type: str
) -> dict[str, dict[str, str]]:
    """Every ``/config/<root>/<r>/<child>/<c>`` by ``<r>/<child>/<c>`` (``alice/clients/app``)."""
    out = {}
    for root in await _children(store, ConfigEntityTypeZNode.path(root_type)):
        folder = f"{root}/{child_type}"
        for child in await _children(store, ConfigEntityZNode.path(root_type, folder)):
            out[f"{folder}/{child}"] = await fetch_entity_config(store, root_type, f"{folder}/{child}")
    return out


async def create_config_change_notification(store: CoordinationStore, entity_path: str) -> str:
    """``/config/changes/config_change_<seq>`` naming ``<type>/<name>``; the created path."""
    await store.ensure_path(ConfigEntityChangeNotificationZNode.path())
    return await store.create(
        ConfigEntityChangeNotificationSequenceZNode.create_path(),
        ConfigEntityChangeNotificationSequenceZNode.encode(entity_path),
        sequential=True,
    )


async def alter_entity_config(
    store: CoordinationStore,
    entity_type: str,
    entity_name: str,
    set_configs: Mapping[str, str] | None = None,
    delete_configs: Iterable[str] = (),
    *,
    require_existing: bool = False,
) -> dict[str, str]:
    """Merge ``set_configs`` into the entity and remove ``delete_configs``; the config written.

    Conditional on the znode's version, retried on a concurrent write (see the module docstring),
    then a change notification is written. With ``require_existing`` a key to delete that the
    entity lacks raises ``InvalidConfigError("Invalid config(s): k1,k2")`` before anything is
    written (kafka-configs' check). ``entity_name`` is already sanitized.
    """
    if entity_type not in ConfigType.ALL:
        raise ValueError(f"{entity_type} is not a known entityType. Should be one of {', '.join(ConfigType.ALL)}")
    updates = dict(set_configs or {})
    deletes = [k for k in dict.fromkeys(delete_configs) if k not in updates]
    path = ConfigEntityZNode.path(entity_type, entity_name)
    for _ in range(MAX_WRITE_ATTEMPTS):
        current, version = await _read(store, entity_type, entity_name)
        if require_existing:
            missing = [k for k in deletes if k not in current]
            if missing:
                raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
        merged = {k: v for k, v in current.items() if k not in deletes}
        merged.update(updates)
        try:
            if not merged and entity_type in QUOTA_ENTITY_TYPES and await _clean_quota_node(store, path, version):
                pass
            elif version is None:
                await store.create(path, ConfigEntityZNode.encode(merged), makepath=True)
            else:
                await store.set(path, ConfigEntityZNode.encode(merged), version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        await create_config_change_notification(store, f"{entity_type}/{entity_name}")
        return merged
    raise CoordinationError(f"could not update {path}: {MAX_WRITE_ATTEMPTS} concurrent writes in a row")


async def _clean_quota_node(store: CoordinationStore, path: str, version: int | None) -> bool:
    """Delete an emptied quota entity without children, then its emptied ancestors up to
    ``/config/<type>`` (``users/<u>/clients`` and ``users/<u>`` when it holds no keys); False
    when the entity has children (an empty map is written instead). BadVersionError when the
    entity changed since it was read."""
    if version is None:
        return True
    try:
        await store.delete(path, version)
    except NotEmptyError:
        return False
    log.info("deleted %s: its config is empty and it has no children", path)
    parent = parent_path(path)
    while parent.count("/") > 2:  # stop at /config/<type>
        try:
            data, stat = await store.get(parent)
            if stat.num_children or (data and json.loads(data).get("config")):
                break
            await store.delete(parent, stat.version)
        except (NoNodeError, NotEmptyError, BadVersionError, ValueError, AttributeError):
            break
        parent = parent_path(parent)
    return True


class ZkConfigManager:
    """Kafka's ``ZkConfigManager``: ``handlers`` by root entity type (``"users"``, ``"topics"``...)."""

    def __init__(
        self,
        store: CoordinationStore,
        handlers: Mapping[str, ConfigHandler],
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.handlers = dict(handlers)
        extra = {} if clock_ms is None else {"clock_ms": clock_ms}
        self.listener = ZkNodeChangeNotificationListener(
            store,
            ConfigEntityChangeNotificationZNode.path(),
            ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX,
            self.process_notification,
            change_expiration_ms=change_expiration_ms,
            **extra,
        )

    async def startup(self) -> None:
        """Follow ``/config/changes``, then hand every existing entity of a handled type over."""
        await self.listener.init()
        for entity_type, handler in self.handlers.items():
            entities = await fetch_all_entity_configs(self.store, entity_type)
            if entity_type == ConfigType.USER:
                entities.update(await fetch_all_child_entity_configs(self.store, ConfigType.USER, ConfigType.CLIENT))
            for name, config in entities.items():
                await _call(handler, name, config)

    async def shutdown(self) -> None:
        await self.listener.close()

    async def process_notification(self, data: bytes) -> None:
        """One ``config_change_`` notice (v1 or v2); ``ValueError`` for a malformed one."""
        try:
            notice = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return  # not JSON: the old TopicConfigManager's notices, ignored as Kafka does
        if not isinstance(notice, dict):
            raise ValueError(f"Config change notification has an unexpected value. Received: {data!r}")
        version = notice.get("version")
        if version == 1:
            entity_type, name = notice.get("entity_type"), notice.get("entity_name")
            if entity_type not in (ConfigType.TOPIC, ConfigType.CLIENT) or not isinstance(name, str):
                raise ValueError(f"Invalid version 1 config change notification: {data!r}")
        elif version == 2:
            entity_path = notice.get("entity_path")
            if not isinstance(entity_path, str) or "/" not in entity_path:
                raise ValueError(f"Version 2 config change notification must specify 'entity_path': {data!r}")
            entity_type, _, name = entity_path.partition("/")
        else:
            raise ValueError(f"Config change notification has unsupported version '{version}', supported are 1 and 2.")
        handler = self.handlers.get(entity_type)
        if handler is None:
            return
        await _call(handler, name, await fetch_entity_config(self.store, entity_type, name))


async def _call(handler: ConfigHandler, name: str, config: dict[str, str]) -> None:
    result = handler(name, config)
    if inspect.isawaitable(result):
        await result
