"""The embedded coordination store behaves like ZooKeeper and keeps persistent znodes across restarts."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.store_batches import check_batches, check_state_updates

from odradek.metadata import embedded
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.errors import (
    BadVersionError,
    CorruptStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreUnavailableError,
)
from odradek.metadata.snapshot import read_snapshot, snapshot_path
from odradek.metadata.store import CheckVersionOp, CreateOp, DeleteOp, SessionState, SetDataOp

from .metadata_support import run, settle


def test_create_get_set_versions_and_delete() -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()
        assert await s.create("/a", b"1") == "/a"
        data, stat = await s.get("/a")
        assert data == b"1" and stat.version == 0 and stat.ephemeral_owner == 0 and stat.data_length == 1
        assert (await s.set("/a", b"2", version=0)).version == 1
        with pytest.raises(BadVersionError):
            await s.set("/a", b"3", version=0)
        assert (await s.set("/a", b"3")).version == 2
        with pytest.raises(NodeExistsError):
            await s.create("/a")
        with pytest.raises(NoNodeError, match="parent /x does not exist"):
            await s.create("/x/y")
        assert await s.create("/x/y/z", makepath=True) == "/x/y/z"
        with pytest.raises(NotEmptyError):
            await s.delete("/x")
        with pytest.raises(BadVersionError):
            await s.delete("/a", version=7)
        await s.delete("/x", recursive=True)
        assert await s.exists("/x") is None
        with pytest.raises(NoNodeError, match="No node exists at /x"):
            await s.get("/x")
        with pytest.raises(ValueError):
            await s.get("no-slash")
        with pytest.raises(ValueError):
            await s.delete("/")

    run(scenario)


def test_children_are_sorted_and_sequential_names_use_the_parent_counter() -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()
        await s.create("/p")
        await s.create("/p/b")
        await s.create("/p/a")
        first = await s.create("/p/seq_", sequential=True)
        second = await s.create("/p/seq_", sequential=True)
        assert first == "/p/seq_0000000002" and second == "/p/seq_0000000003"
        assert await s.get_children("/p") == ["a", "b", "seq_0000000002", "seq_0000000003"]
        stat = await s.exists("/p")
        assert stat is not None and stat.num_children == 4 and stat.cversion == 4
        with pytest.raises(NoNodeError):
            await s.get_children("/missing")

    run(scenario)


def test_ephemeral_nodes_vanish_when_their_session_closes_and_watches_fire() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        broker, observer = store.session(), store.session()
        await observer.create("/brokers/ids", makepath=True)
        events: list[str] = []

        async def on_change(path: str) -> None:
            events.append(path)

        observer.watch_children("/brokers/ids", on_change)
        observer.watch_data("/brokers/ids/1", on_change)
        await broker.create("/brokers/ids/1", b"{}", ephemeral=True)
        stat = await observer.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == broker.session_id
        with pytest.raises(NoChildrenForEphemeralsError):
            await broker.create("/brokers/ids/1/x")
        await settle()
        assert events == ["/brokers/ids/1", "/brokers/ids"]  # the data watch, then the children watch
        events.clear()
        await broker.close()
        await settle()
        assert await observer.get_children("/brokers/ids") == []
        assert sorted(events) == ["/brokers/ids", "/brokers/ids/1"]
        with pytest.raises(StoreUnavailableError, match="closed"):
            await broker.get("/")

    run(scenario)


def test_watches_are_persistent_and_cancellable() -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()
        seen: list[str] = []

        async def on_data(path: str) -> None:
            seen.append(path)

        handle = s.watch_data("/n", on_data)
        await s.create("/n", b"0")
        await s.set("/n", b"1")
        await s.set("/n", b"2")
        await settle()
        assert seen == ["/n"] * 3
        handle.cancel()
        assert handle.cancelled
        await s.set("/n", b"3")
        await settle()
        assert len(seen) == 3

    run(scenario)


def test_a_failing_callback_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()

        async def broken(path: str) -> None:
            raise RuntimeError("boom")

        s.watch_children("/", broken)
        await s.create("/a")
        await settle()

    run(scenario)
    assert "boom" in caplog.text


def test_multi_is_atomic() -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()
        await s.create("/epoch", b"1")
        results = await s.multi([CheckVersionOp("/epoch", 0), CreateOp("/a", b"x"), SetDataOp("/epoch", b"2", 0)])
        assert results[1] == "/a" and results[0] is None
        with pytest.raises(BadVersionError):
            await s.multi([CreateOp("/b"), DeleteOp("/a"), CheckVersionOp("/epoch", 0)])
        assert await s.exists("/b") is None and await s.exists("/a") is not None
        assert (await s.get("/epoch"))[0] == b"2"

    run(scenario)


def test_expire_gives_a_new_session_and_drops_ephemerals() -> None:
    async def scenario() -> None:
        s = EmbeddedStore().session()
        states: list[SessionState] = []

        async def on_session(state: SessionState) -> None:
            states.append(state)

        s.watch_session(on_session)
        await s.create("/e", ephemeral=True)
        old = s.session_id
        await s.expire()
        await settle()
        assert s.session_id != old and states == [SessionState.EXPIRED]
        assert await s.exists("/e") is None

    run(scenario)


WRITER = """
import asyncio, os, signal, sys
from odradek.metadata import embedded
from odradek.metadata.embedded import EmbeddedStore

async def main():
    s = EmbeddedStore(sys.argv[1]).session()
    await s.create("/brokers/topics/t", b'{"version":1}', makepath=True)
    await s.set("/brokers/topics/t", b'{"version":1,"partitions":{}}')
    await s.create("/brokers/ids/0", b"{}", ephemeral=True, makepath=True)
    await s.create("/bin", b"\\x00\\xff")
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_persistent_nodes_survive_kill_9_and_ephemeral_ones_do_not(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path)], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()

    async def read() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        data, stat = await s.get("/brokers/topics/t")
        assert data == b'{"version":1,"partitions":{}}' and stat.version == 1
        assert await s.get_children("/brokers/ids") == []
        assert (await s.get("/bin"))[0] == b"\x00\xff"
        await store.close()

    run(read)


STREAMER = """
import asyncio, sys
from odradek.metadata.embedded import EmbeddedStore

async def main():
    s = EmbeddedStore(sys.argv[1]).session()
    i = int(sys.argv[2])
    if i == 0:
        await s.create("/seq", b"")
    while True:  # 16 creates at a time: they share snapshot writes (group commit)
        await asyncio.gather(*(s.create(f"/seq/{n:06d}", str(n).encode()) for n in range(i, i + 16)))
        i += 16
        print(i - 1, flush=True)

asyncio.run(main())
"""


def test_kill_9_while_the_writer_thread_writes_leaves_a_prefix_of_the_writes(tmp_path: Path) -> None:
    """A process streaming creates is killed with SIGKILL three times, at different moments of the
    writer thread's snapshots; after each kill the store opens, holds every create it
    acknowledged, and holds them as a prefix of the order they were made (nothing torn, nothing
    out of order), and the next process carries on from there."""
    next_index = 0
    for delay in (0.05, 0.2, 0.45):
        child = subprocess.Popen(
            [sys.executable, "-c", STREAMER, str(tmp_path), str(next_index)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # streaming now: the kill lands among the writes
        timer = threading.Timer(delay, child.kill)
        timer.start()
        out, err = child.communicate(timeout=60)
        timer.cancel()
        assert child.returncode == -signal.SIGKILL, err.decode()
        acknowledged = [int(line) for line in (first + out).split()]

        async def read() -> list[tuple[str, bytes]]:
            store = EmbeddedStore(tmp_path)
            session = store.session()
            names = sorted(await session.get_children("/seq"))
            found = [(name, (await session.get(f"/seq/{name}"))[0]) for name in names]
            await store.close()
            return found

        found = run(read)
        assert [name for name, _ in found] == [f"{n:06d}" for n in range(len(found))]
        assert all(data == str(int(name)).encode() for name, data in found)
        if acknowledged:
            assert len(found) > acknowledged[-1]
        assert len(found) >= next_index
        next_index = len(found)
    assert next_index > 0


def test_a_second_owner_of_the_directory_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        with pytest.raises(StoreUnavailableError, match="locked"):
            EmbeddedStore(tmp_path)
        await store.close()
        EmbeddedStore(tmp_path)  # released

    run(scenario)


def test_a_torn_tmp_file_is_ignored(tmp_path: Path) -> None:
    async def write() -> None:
        store = EmbeddedStore(tmp_path)
        await store.session().create("/kept", b"v")
        await store.close()

    run(write)
    snapshot = snapshot_path(tmp_path)
    tmp = snapshot.with_name(snapshot.name + ".tmp")
    tmp.write_bytes(snapshot.read_bytes()[:25])  # a crash in the middle of the next write

    async def read() -> None:
        store = EmbeddedStore(tmp_path)
        assert (await store.session().get("/kept"))[0] == b"v"
        await store.close()

    run(read)
    assert not tmp.exists()


def test_a_corrupt_snapshot_fails_loudly_and_names_the_backup(tmp_path: Path) -> None:
    async def write() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        await s.create("/a", b"1")
        await s.create("/b", b"2")
        await store.close()

    run(write)
    snapshot = snapshot_path(tmp_path)
    raw = snapshot.read_bytes()
    snapshot.write_bytes(raw.replace(b'"data":"2"', b'"data":"3"'))  # a flipped byte
    with pytest.raises(CorruptStoreError, match=r"checksum mismatch.*znodes\.json\.bak"):
        EmbeddedStore(tmp_path)
    snapshot.write_bytes(raw[: len(raw) // 2])  # truncated
    with pytest.raises(CorruptStoreError, match="bytes"):
        EmbeddedStore(tmp_path)
    snapshot.unlink()  # gone, but a backup exists: never start empty silently
    with pytest.raises(CorruptStoreError, match="missing"):
        EmbeddedStore(tmp_path)


def test_snapshot_file_format(tmp_path: Path) -> None:
    async def write() -> None:
        store = EmbeddedStore(tmp_path)
        await store.session().create("/a", b'{"k":1}')
        await store.close()

    run(write)
    header, body = snapshot_path(tmp_path).read_text().split("\n", 1)
    assert json.loads(header)["format"] == "odradek-znodes" and json.loads(header)["nodes"] == 2
    records = json.loads(body)
    assert [r["path"] for r in records] == ["/", "/a"] and records[1]["data"] == '{"k":1}'


def test_read_only_store_sees_the_tree_and_refuses_writes(tmp_path: Path) -> None:
    async def scenario() -> None:
        owner = EmbeddedStore(tmp_path)
        await owner.session().create("/a", b"1")
        reader = EmbeddedStore(tmp_path, read_only=True).session()  # no lock taken
        assert (await reader.get("/a"))[0] == b"1"
        with pytest.raises(Exception, match="read-only"):
            await reader.create("/b")
        await owner.close()

    run(scenario)


def test_snapshot_after_random_changes_equals_a_full_encoding(tmp_path: Path) -> None:
    """The store re-encodes only the znodes a change touched; the file must still hold exactly
    every persistent znode, as a full encoding of the tree would, after every kind of change."""
    import random

    from odradek.metadata.snapshot import NodeRecord, read_snapshot

    def full_encoding(store: EmbeddedStore) -> list[NodeRecord]:
        return [
            NodeRecord(path, n.data, n.version, n.cversion, n.ctime, n.mtime)
            for path, n in sorted(store._nodes.items())
            if n.ephemeral_owner == 0
        ]

    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        rng = random.Random(7)
        paths = ["/a", "/a/b", "/a/c", "/d", "/d/e/f"]
        for step in range(300):
            path = rng.choice(paths)
            action = rng.choice(["create", "ephemeral", "sequential", "set", "delete", "multi", "failing-multi"])
            before = read_snapshot(snapshot_path(tmp_path))
            outcome = "persisted"
            try:
                if action == "create":
                    await s.create(path, b"%d" % step, makepath=True)
                elif action == "ephemeral":  # written only if makepath created persistent parents
                    outcome = "maybe"
                    await s.create(path + "-eph", b"e", ephemeral=True, makepath=True)
                elif action == "sequential":
                    await s.create(path + "/q-", b"\xff\x00", sequential=True, makepath=True)  # not UTF-8
                elif action == "set":
                    await s.set(path, b"%d" % step)
                elif action == "delete":
                    await s.delete(path, recursive=True)
                elif action == "multi":
                    await s.multi([CreateOp(f"{path}/m{step}", b"m"), SetDataOp(path, b"multi")])
                else:  # the second op fails: the first must leave no trace, in memory or on disk
                    outcome = "none"
                    await s.multi([CreateOp(f"/x{step}", b"x"), CheckVersionOp("/nowhere", 0)])
            except (NodeExistsError, NoNodeError, NotEmptyError, BadVersionError, NoChildrenForEphemeralsError):
                outcome = "none" if outcome == "persisted" else outcome
            got = read_snapshot(snapshot_path(tmp_path))
            expected = {"persisted": [full_encoding(store)], "maybe": [before, full_encoding(store)], "none": [before]}
            assert got in expected[outcome], f"step {step}: {action} {path}"
        await store.close()

    run(scenario)


def test_batches_read_in_order_and_apply_each_transaction_on_its_own() -> None:
    async def scenario() -> None:
        store = EmbeddedStore().session()
        await check_batches(store)
        await check_state_updates(store)

    run(scenario)


def test_a_batch_of_transactions_writes_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = _count_writes(monkeypatch)

    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        await s.multi_many([[CreateOp(f"/n{i}", b"x")] for i in range(100)])
        assert len(writes) == 1
        await s.close()
        reopened = EmbeddedStore(tmp_path, read_only=True).session()
        assert len(await reopened.get_many([f"/n{i}" for i in range(100)])) == 100
        assert None not in await reopened.get_many([f"/n{i}" for i in range(100)])

    run(scenario)


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """Patch the writer's snapshot function to record the thread of each write."""
    writes: list[threading.Thread] = []
    real = embedded.write_snapshot_lines

    def counted(path: Path, lines: list[str]) -> None:
        writes.append(threading.current_thread())
        real(path, lines)

    monkeypatch.setattr(embedded, "write_snapshot_lines", counted)
    return writes


def test_concurrent_changes_share_snapshot_writes_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand concurrent creates (CreateTopics of a thousand topics) cost a few writes, all in
    the writer thread, and each create returns only once the snapshot holds it."""
    writes = _count_writes(monkeypatch)

    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        seen: list[str] = []
        s.watch_children("/", lambda _p: _record(seen, "children"))
        await asyncio.gather(*(s.create(f"/t{i}", b"x") for i in range(1000)))
        assert 1 <= len(writes) <= 3, len(writes)
        assert all(t is not threading.main_thread() for t in writes)
        on_disk = {r.path for r in read_snapshot(snapshot_path(tmp_path)) or []}
        assert {f"/t{i}" for i in range(1000)} <= on_disk
        await settle()
        assert seen  # the watch fired after the write
        await s.close()
        await store.close()

    run(scenario)


async def _record(seen: list[str], what: str) -> None:
    seen.append(what)


def test_an_ephemeral_change_is_notified_behind_a_queued_persistent_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        await s.create("/a")
        await s.create("/b")
        order: list[str] = []
        s.watch_children("/a", lambda p: _record(order, p))
        s.watch_children("/b", lambda p: _record(order, p))
        persistent = asyncio.ensure_future(s.create("/a/persistent"))
        await asyncio.sleep(0)  # applied and queued; its write is in flight
        await s.create("/b/ephemeral", ephemeral=True)
        await persistent
        await settle()
        assert order == ["/a", "/b"]
        await s.close()
        await store.close()

    run(scenario)


def test_a_failed_snapshot_write_fails_the_store_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        store = EmbeddedStore(tmp_path)
        s = store.session()
        await s.create("/kept", b"1")

        def full(path: Path, lines: list[str]) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(embedded, "write_snapshot_lines", full)
        with pytest.raises(StoreUnavailableError, match="No space left"):
            await s.create("/lost", b"2")
        with pytest.raises(StoreUnavailableError):
            await s.set("/kept", b"3")
        assert "writing" in caplog.text and "No space left" in caplog.text
        await s.close()
        await store.close()
        monkeypatch.undo()
        reopened = EmbeddedStore(tmp_path, read_only=True).session()
        assert await reopened.get("/kept") is not None
        assert (await reopened.get("/kept"))[0] == b"1"
        assert await reopened.exists("/lost") is None

    run(scenario)
