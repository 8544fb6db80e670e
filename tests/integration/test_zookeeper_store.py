"""The ZooKeeper store and KafkaZkClient against a real Apache ZooKeeper 3.8 (``testing_zk``)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from tests.store_batches import check_batches, check_state_updates

from odradek.cli.zk import main as zk_main
from odradek.metadata.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.store import CheckVersionOp, CreateOp, SessionState, SetDataOp
from odradek.metadata.znodes import BrokerInfo, LeaderAndIsr, TopicPartition
from odradek.metadata.zookeeper import ZooKeeperStore, parse_connect_string
from odradek.testing_zk import ZooKeeperServer

from .zk_support import eventually, run

pytestmark = pytest.mark.zookeeper


def test_parse_connect_string() -> None:
    assert parse_connect_string("zk1:2181,zk2:2181/kafka") == ("zk1:2181,zk2:2181", "/kafka")
    assert parse_connect_string("zk1:2181") == ("zk1:2181", "")
    assert parse_connect_string("zk1:2181/") == ("zk1:2181", "")
    for bad in ("", "/chroot", "zk1:port", "zk1:2181/a//b"):
        with pytest.raises(ValueError):
            parse_connect_string(bad)


def test_store_operations_and_chroot(zookeeper_server: ZooKeeperServer, zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect, session_timeout_ms=6000) as s:
            assert s.session_id != 0
            assert await s.create("/a", b"1") == "/a"
            data, stat = await s.get("/a")
            assert data == b"1" and stat.version == 0
            assert (await s.set("/a", b"2", 0)).version == 1
            with pytest.raises(BadVersionError):
                await s.set("/a", b"3", 0)
            with pytest.raises(NodeExistsError):
                await s.create("/a")
            with pytest.raises(NoNodeError, match="No node exists at /x/y"):
                await s.create("/x/y")
            assert await s.create("/x/y/z", makepath=True) == "/x/y/z"
            assert await s.create("/x/seq_", sequential=True) == "/x/seq_0000000001"
            assert await s.get_children("/x") == ["seq_0000000001", "y"]
            with pytest.raises(NotEmptyError):
                await s.delete("/x")
            await s.delete("/x", recursive=True)
            assert await s.exists("/x") is None
            await s.multi([CreateOp("/m", b"x"), SetDataOp("/a", b"4", 1)])
            with pytest.raises(BadVersionError):
                await s.multi([CreateOp("/n"), CheckVersionOp("/a", 0)])
            assert await s.exists("/n") is None and await s.exists("/m") is not None
        chroot = zookeeper_connect[zookeeper_connect.index("/") :]
        async with ZooKeeperStore(zookeeper_server.connect_string) as root:
            assert await root.exists(chroot + "/a") is not None  # the chroot was created

    run(scenario)


def test_ephemerals_vanish_on_close_and_watches_fire(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect) as observer:
            broker = ZooKeeperStore(zookeeper_connect)
            await broker.start()
            await observer.ensure_path("/brokers/ids")
            children: list[str] = []
            data_events: list[str] = []

            async def on_children(path: str) -> None:
                children.append(",".join(await observer.get_children(path)))

            async def on_data(path: str) -> None:
                data_events.append(path)

            observer.watch_children("/brokers/ids", on_children)
            observer.watch_data("/brokers/ids/1", on_data)
            # The watches are armed before the observer's next request is served; another
            # session's change is only guaranteed to be seen after that (ZooKeeper's ordering).
            assert await observer.exists("/brokers/ids/1") is None
            await broker.create("/brokers/ids/1", b"{}", ephemeral=True)
            await eventually(lambda: children[-1:] == ["1"] and len(data_events) == 1)
            stat = await observer.exists("/brokers/ids/1")
            assert stat is not None and stat.ephemeral_owner == broker.session_id
            await broker.set("/brokers/ids/1", b"{ }")
            await eventually(lambda: len(data_events) == 2)  # the data watch was re-armed
            await broker.close()
            await eventually(lambda: children[-1:] == [""] and len(data_events) == 3)
            assert await observer.exists("/brokers/ids/1") is None
            with pytest.raises(StoreUnavailableError, match="closed"):
                await broker.get("/")

    run(scenario)


def test_kafka_zk_client_verbs(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect) as sa, ZooKeeperStore(zookeeper_connect) as sb:
            a, b = KafkaZkClient(sa), KafkaZkClient(sb)
            await asyncio.gather(a.create_top_level_paths(), b.create_top_level_paths())
            assert await a.get_or_create_cluster_id() == await b.get_or_create_cluster_id()
            await a.register_broker(BrokerInfo(id=1, host="h", port=9092))
            await b.register_broker(BrokerInfo(id=2, host="h", port=9093))
            with pytest.raises(BrokerIdAlreadyRegisteredError):
                await b.register_broker(BrokerInfo(id=1, host="h", port=9094))
            assert [x.id for x in await a.get_all_brokers()] == [1, 2]

            won = await asyncio.gather(a.try_create_controller(1), b.try_create_controller(2))
            assert sorted(won) == [False, True]
            winner, loser = (a, b) if won[0] else (b, a)
            assert await winner.increment_controller_epoch() == 1
            moved: list[str] = []

            async def on_controller(path: str) -> None:
                moved.append(path)

            loser.store.watch_data("/controller", on_controller)
            assert await loser.get_controller_id() is not None

            topic_id = await winner.create_topic_assignment("t", {0: [1, 2]}, {"cleanup.policy": "compact"})
            assert await loser.get_topic_assignment("t") == ({0: [1, 2]}, topic_id)
            tp = TopicPartition("t", 0)
            version = await winner.create_partition_state(tp, LeaderAndIsr(1, 0, [1, 2], 1))
            version = await winner.update_leader_and_isr(tp, LeaderAndIsr(1, 1, [1], 1), version)
            with pytest.raises(BadVersionError):
                await loser.update_leader_and_isr(tp, LeaderAndIsr(2, 1, [2], 1), 0)

            await winner.store.close()  # the controller's session ends: /controller goes
            await eventually(lambda: len(moved) >= 1)
            assert await loser.get_controller_id() is None
            elected = await loser.try_elect_controller(7)
            assert elected is not None and elected[0] == 2
            with pytest.raises(ControllerMovedError):
                await loser.update_leader_and_isr(tp, LeaderAndIsr(2, 2, [2], 2), version, elected[1] - 1)
            assert await loser.update_leader_and_isr(tp, LeaderAndIsr(2, 2, [2], 2), version, elected[1]) == 2

            await loser.set_entity_configs("topics", "t", {"retention.ms": "1"})
            assert await loser.get_entity_configs("topics", "t") == {"retention.ms": "1"}
            await loser.set_consumer_offset("g", tp, 5)
            assert await loser.get_consumer_offset("g", tp) == 5
            await loser.request_topic_deletion("t")
            await loser.delete_topic("t")
            await loser.delete_topic_deletion("t")
            assert await loser.get_all_topics() == [] and await loser.get_topic_deletions() == []

    run(scenario)


def test_unreachable_zookeeper_fails_fast_with_a_precise_message() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there

    async def scenario() -> None:
        store = ZooKeeperStore(f"127.0.0.1:{port}/kafka", connection_timeout_ms=1500)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            await store.start()
        assert time.monotonic() - started < 10
        assert str(info.value) == f"cannot reach ZooKeeper at 127.0.0.1:{port}/kafka within 1500 ms"

    run(scenario)


def test_watches_survive_a_server_restart(zookeeper_connect: str) -> None:
    # A private server: restarting the shared one would disturb other tests.
    with ZooKeeperServer() as server:
        connect = server.chroot_connect("/restart")

        async def scenario() -> None:
            async with ZooKeeperStore(connect, session_timeout_ms=20000) as s:
                states: list[SessionState] = []
                seen: list[list[str]] = []

                async def on_session(state: SessionState) -> None:
                    states.append(state)

                async def on_children(path: str) -> None:
                    seen.append(await s.get_children(path))

                s.watch_session(on_session)
                await s.create("/eph", ephemeral=True)
                await s.ensure_path("/w")
                s.watch_children("/w", on_children)
                await asyncio.to_thread(server.restart)
                # The client retries every second; the restarted server answers it once it has loaded
                # its data, which on a busy machine's JVM takes a while.
                await eventually(
                    lambda: SessionState.CONNECTED in states or SessionState.EXPIRED in states,
                    60,
                    lambda: f"(session states {states}; ZooKeeper log: {server._log_tail()})",
                )
                assert states[-1] == SessionState.CONNECTED, f"session states {states}: {server._log_tail()}"
                assert SessionState.SUSPENDED in states
                assert await s.exists("/eph") is not None  # same session: the ephemeral survived
                await s.create("/w/after")
                await eventually(lambda: ["after"] in seen, 10)

        run(scenario, 120)


def test_session_survives_a_zookeeper_outage_longer_than_the_default_backoff() -> None:
    """The fault campaign's zk-restart: ZooKeeper killed and back seven seconds later. The restarted
    server gives each session its timeout again; a client whose reconnect pauses had doubled up to
    6.4 s (kazoo's default) came back after it and lost its session (a broker's registration, the
    controller's znode). Retrying at most every second, the session survives. Its timeout (6 s)
    is shorter than kazoo's default pause, and leaves the client time to reconnect on a machine
    busy with other tests (with 2 s, and once with 4 s, it did not, under a parallel suite)."""
    with ZooKeeperServer() as server:
        connect = server.chroot_connect("/outage")

        async def scenario() -> None:
            async with ZooKeeperStore(connect, session_timeout_ms=6000) as s:
                states: list[SessionState] = []

                async def on_session(state: SessionState) -> None:
                    states.append(state)

                s.watch_session(on_session)
                await s.create("/eph", ephemeral=True)
                process = server._process
                assert process is not None
                process.kill()  # kill -9: the session is not closed
                await asyncio.to_thread(process.wait)
                await eventually(lambda: SessionState.SUSPENDED in states, 10)
                await asyncio.sleep(7.0)
                await asyncio.to_thread(server.restart)
                await eventually(lambda: SessionState.CONNECTED in states or SessionState.EXPIRED in states, 20)
                assert SessionState.EXPIRED not in states
                assert await s.exists("/eph") is not None  # the same session: its ephemeral survived

        run(scenario)


def test_cli_over_zookeeper(zookeeper_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def populate() -> None:
        async with ZooKeeperStore(zookeeper_connect) as s:
            await s.create("/brokers/topics/t", b'{"version":1,"partitions":{"0":[0]}}', makepath=True)

    run(populate)
    assert zk_main(["--zookeeper", zookeeper_connect, "ls", "/brokers/topics"]) == 0
    assert capsys.readouterr().out == "t\n"
    assert zk_main(["--zookeeper", zookeeper_connect, "get", "/brokers/topics/t"]) == 0
    assert capsys.readouterr().out == '{"version":1,"partitions":{"0":[0]}}\n'
    assert zk_main(["--zookeeper", zookeeper_connect, "tree", "/brokers"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "/brokers",
        "  topics",
        '    t = {"version":1,"partitions":{"0":[0]}}',
    ]
    assert zk_main(["--zookeeper", zookeeper_connect, "get", "/nope"]) == 1
    assert capsys.readouterr().err == "No node exists at /nope\n"


def test_session_expiry_is_reported_and_a_new_session_takes_over(zookeeper_connect: str) -> None:
    from kazoo.client import KazooClient  # only to end the store's session from outside

    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect, session_timeout_ms=6000) as s:
            states: list[SessionState] = []
            seen: list[str] = []

            async def on_session(state: SessionState) -> None:
                states.append(state)

            async def on_children(path: str) -> None:
                seen.append(path)

            s.watch_session(on_session)
            await s.create("/eph", ephemeral=True)
            s.watch_children("/", on_children)
            old_id = s.session_id
            assert s._client is not None
            hosts = zookeeper_connect.split("/", 1)[0]
            twin = KazooClient(hosts=hosts, client_id=s._client.client_id)  # same session id and password

            def end_session() -> None:
                twin.start(timeout=10)
                twin.stop()
                twin.close()

            await asyncio.to_thread(end_session)
            await eventually(lambda: SessionState.EXPIRED in states, 30)
            assert s.session_id != old_id
            assert await s.exists("/eph") is None  # the old session's ephemeral is gone
            seen.clear()
            await s.create("/again", ephemeral=True)  # the new session works, and watches were re-armed
            await eventually(lambda: "/" in seen, 10)

    run(scenario)


def test_batches_are_pipelined_and_apply_each_transaction_on_its_own(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect, session_timeout_ms=6000) as s:
            await check_batches(s, count=3000)  # multiRead: six chunks, one missing znode
            await check_state_updates(s)

    run(scenario)


def test_ten_thousand_partition_states_are_created_in_chunks_under_the_request_limit(zookeeper_connect: str) -> None:
    """One multi of 10,000 state znodes would pass ZooKeeper's jute.maxbuffer (the server drops
    the connection); chunks of 1,000 pipelined in order create them all."""

    async def scenario() -> None:
        async with ZooKeeperStore(zookeeper_connect, session_timeout_ms=6000) as s:
            zk = KafkaZkClient(s)
            await s.create("/brokers/topics/big", makepath=True)  # the topic's assignment znode
            states = {p: LeaderAndIsr(1, 0, [1, 2, 3], 1) for p in range(10_000)}
            await zk.create_partition_states("big", states)
            read = await zk.get_partition_states_of([TopicPartition("big", p) for p in range(10_000)])
            assert all(r is not None and list(r.isr) == [1, 2, 3] for r in read)
            assert len(await s.get_children("/brokers/topics/big/partitions")) == 10_000

    run(scenario)


def test_a_store_closed_while_connecting_ends_that_session(zookeeper_connect: str) -> None:
    def connection_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if "(zk_loop)" in t.name]  # kazoo's connection loop

    async def scenario() -> None:
        assert not connection_threads()  # every other session of this module was closed
        store = ZooKeeperStore(zookeeper_connect, session_timeout_ms=6000)
        starting = asyncio.create_task(store.start())
        await asyncio.sleep(0)  # start() is now connecting on a worker thread
        await store.close()
        with pytest.raises(StoreUnavailableError, match="closed"):
            await starting
        assert not store.connected
        await eventually(lambda: not connection_threads(), 10)  # the session was stopped, not left running

    run(scenario)
