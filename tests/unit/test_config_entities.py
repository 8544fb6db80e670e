"""The /config entities: merging writes, clean-up of emptied quota entities, change notices and the
ZkConfigManager / ZkNodeChangeNotificationListener that follow them, over the embedded store."""

from __future__ import annotations

import json

import pytest

from odradek.errors import InvalidConfigError
from odradek.metadata.change_notifications import ZkNodeChangeNotificationListener
from odradek.metadata.config_entities import (
    ZkConfigManager,
    alter_entity_config,
    desanitize,
    fetch_all_child_entity_configs,
    fetch_entity_config,
    sanitize,
)
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.store import CoordinationStore

from .metadata_support import run, settle


async def _changes(store: CoordinationStore) -> list[bytes]:
    names = await store.get_children("/config/changes")
    return [(await store.get(f"/config/changes/{n}"))[0] for n in names]


def test_sanitize_as_kafka() -> None:
    assert sanitize("alice") == "alice"
    assert sanitize("User:a b*") == "User%3Aa%20b%2A"
    assert sanitize("CN=x,O=é~") == "CN%3Dx%2CO%3D%C3%A9%7E"
    assert sanitize("a.b-c_d") == "a.b-c_d"
    for name in ("User:a b*", "CN=x,O=é~", "a+b"):
        assert desanitize(sanitize(name)) == name
    assert desanitize("a+b") == "a b"  # Java's URLDecoder


def test_writes_merge_delete_keys_and_notify() -> None:
    async def scenario() -> None:
        store = EmbeddedStore(None).session()
        await alter_entity_config(store, "users", "alice", {"SCRAM-SHA-256": "x"})
        await alter_entity_config(store, "users", "alice", {"producer_byte_rate": "1024"})
        data, stat = await store.get("/config/users/alice")
        assert data == b'{"version":1,"config":{"SCRAM-SHA-256":"x","producer_byte_rate":"1024"}}'
        assert stat.version == 1
        merged = await alter_entity_config(store, "users", "alice", {"consumer_byte_rate": "5"}, ["SCRAM-SHA-256"])
        assert merged == {"producer_byte_rate": "1024", "consumer_byte_rate": "5"}
        with pytest.raises(InvalidConfigError, match=r"Invalid config\(s\): nope,other"):
            await alter_entity_config(store, "users", "alice", None, ["nope", "other"], require_existing=True)
        assert await fetch_entity_config(store, "users", "alice") == merged
        notices = await _changes(store)
        assert notices == [b'{"version":2,"entity_path":"users/alice"}'] * 3
        assert await store.get_children("/config/changes") == [f"config_change_{i:010d}" for i in range(3)]
        with pytest.raises(ValueError, match="not a known entityType"):
            await alter_entity_config(store, "client-metrics", "m", {"a": "b"})

    run(scenario)


def test_two_concurrent_writers_merge() -> None:
    """Two sessions (two brokers or tools) read the same version; the loser re-reads and re-applies."""

    async def scenario() -> None:
        tree = EmbeddedStore(None)
        one, two = tree.session(), tree.session()
        await alter_entity_config(one, "users", "bob", {"base": "1"})
        real_get = two.get
        raced = False

        async def get_then_race(path: str) -> tuple[bytes, object]:
            nonlocal raced
            result = await real_get(path)
            if not raced and path == "/config/users/bob":
                raced = True  # the other writer lands between this read and the conditional write
                await alter_entity_config(one, "users", "bob", {"SCRAM-SHA-512": "cred"})
            return result

        two.get = get_then_race  # type: ignore[method-assign,assignment]
        await alter_entity_config(two, "users", "bob", {"producer_byte_rate": "7"}, ["base"])
        assert raced
        assert await fetch_entity_config(one, "users", "bob") == {"SCRAM-SHA-512": "cred", "producer_byte_rate": "7"}

    run(scenario)


def test_emptied_quota_entities_are_removed_topics_are_kept() -> None:
    async def scenario() -> None:
        store = EmbeddedStore(None).session()
        await alter_entity_config(store, "users", "carol", {"SCRAM-SHA-256": "x"})
        await alter_entity_config(store, "users", "carol/clients/app", {"producer_byte_rate": "10"})
        assert await fetch_all_child_entity_configs(store, "users", "clients") == {
            "carol/clients/app": {"producer_byte_rate": "10"}
        }
        await alter_entity_config(store, "users", "carol", None, ["SCRAM-SHA-256"])
        assert await store.get("/config/users/carol") is not None  # it still has children
        assert await fetch_entity_config(store, "users", "carol") == {}
        await alter_entity_config(store, "users", "carol/clients/app", None, ["producer_byte_rate"])
        assert await store.exists("/config/users/carol") is None  # the client, clients/ and the user
        await alter_entity_config(store, "topics", "t", {"retention.ms": "1"})
        await alter_entity_config(store, "topics", "t", None, ["retention.ms"])
        assert (await store.get("/config/topics/t"))[0] == b'{"version":1,"config":{}}'
        notices = [json.loads(n)["entity_path"] for n in await _changes(store)]
        assert notices[-3:] == ["users/carol/clients/app", "topics/t", "topics/t"]

    run(scenario)


def test_listener_processes_each_notice_once_in_order_and_purges_old_ones() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        writer, reader = tree.session(), tree.session()
        await writer.create("/n/c_", b"first", sequential=True, makepath=True)
        seen: list[bytes] = []
        now = [0]
        listener = ZkNodeChangeNotificationListener(
            reader, "/n", "c_", seen.append, change_expiration_ms=1000, clock_ms=lambda: now[0]
        )
        ctime = (await writer.get("/n/c_0000000000"))[1].ctime
        now[0] = ctime
        await listener.init()
        assert seen == [b"first"]  # present at start: processed once
        await writer.create("/n/c_", b"second", sequential=True)
        await writer.create("/n/other", b"ignored")
        await settle()
        await listener.process_notifications()  # a spurious pass changes nothing
        assert seen == [b"first", b"second"] and listener.last_executed_change == 1
        assert await writer.get_children("/n") == ["c_0000000000", "c_0000000001", "other"]  # none expired
        await writer.create("/n/c_", b"third", sequential=True)
        now[0] = (await writer.get("/n/c_0000000003"))[1].ctime + 1001  # all older than the expiration
        await listener.process_notifications()
        assert seen == [b"first", b"second", b"third"]  # processed before purged, each once
        assert await writer.get_children("/n") == ["other"]
        await listener.close()
        await writer.create("/n/c_", b"after close", sequential=True)
        await settle()
        assert seen[-1] == b"third"

    run(scenario)


def test_listener_survives_a_failing_handler() -> None:
    async def scenario() -> None:
        store = EmbeddedStore(None).session()
        seen: list[bytes] = []

        def handler(data: bytes) -> None:
            if data == b"bad":
                raise ValueError("boom")
            seen.append(data)

        listener = ZkNodeChangeNotificationListener(store, "/n", "c_", handler)
        await listener.init()  # no folder yet: nothing to do
        for body in (b"bad", b"good"):
            await store.create("/n/c_", body, sequential=True, makepath=True)
        await settle()
        assert seen == [b"good"] and listener.last_executed_change == 1

    run(scenario)


def test_config_manager_loads_then_follows_every_entity_type() -> None:
    async def scenario() -> None:
        tree = EmbeddedStore(None)
        admin, broker = tree.session(), tree.session()
        await alter_entity_config(admin, "users", "alice", {"SCRAM-SHA-256": "a"})
        await alter_entity_config(admin, "users", "alice/clients/app", {"producer_byte_rate": "1"})
        await alter_entity_config(admin, "topics", "t", {"retention.ms": "5"})
        calls: list[tuple[str, str, dict[str, str]]] = []

        async def topics(name: str, config: dict[str, str]) -> None:
            calls.append(("topics", name, config))

        manager = ZkConfigManager(
            broker,
            {
                "users": lambda name, config: calls.append(("users", name, config)),
                "topics": topics,
                "brokers": lambda name, config: calls.append(("brokers", name, config)),
            },
        )
        await manager.startup()
        assert ("users", "alice", {"SCRAM-SHA-256": "a"}) in calls
        assert ("users", "alice/clients/app", {"producer_byte_rate": "1"}) in calls
        assert ("topics", "t", {"retention.ms": "5"}) in calls
        calls.clear()
        await alter_entity_config(admin, "brokers", "<default>", {"follower.replication.throttled.rate": "9"})
        await alter_entity_config(admin, "clients", "c", {"producer_byte_rate": "3"})  # no handler: ignored
        await admin.create(
            "/config/changes/config_change_", b'{"version":1,"entity_type":"topics","entity_name":"t"}', sequential=True
        )
        await admin.create("/config/changes/config_change_", b"not json", sequential=True)
        await settle()
        assert calls == [
            ("brokers", "<default>", {"follower.replication.throttled.rate": "9"}),
            ("topics", "t", {"retention.ms": "5"}),
        ]
        await manager.shutdown()

    run(scenario)
