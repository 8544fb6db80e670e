"""The batch verbs of the coordination store contract (``get_many``, ``multi_many``), checked the
same way against the embedded store (tests/unit) and a real ZooKeeper (tests/integration), and
the partition state writes built on them."""

from __future__ import annotations

import pytest

from odradek.metadata.errors import BadVersionError, ControllerMovedError, NodeExistsError, NoNodeError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.store import CheckVersionOp, CoordinationStore, CreateOp, SetDataOp
from odradek.metadata.znodes import LeaderAndIsr, TopicPartition


async def check_batches(s: CoordinationStore, count: int = 500) -> None:
    """``count`` znodes written and read in batches: reads in order with None for a missing
    znode; each transaction applied or refused on its own, the refused ones changing nothing."""
    await s.create("/batch", b"")
    created = await s.multi_many([[CreateOp(f"/batch/{i}", b"%d" % i)] for i in range(count)])
    assert created == [[f"/batch/{i}"] for i in range(count)]
    read = await s.get_many([f"/batch/{i}" for i in range(count)] + ["/batch/missing"])
    assert [r[0] if r else None for r in read] == [b"%d" % i for i in range(count)] + [None]
    assert all(r is not None and r[1].version == 0 for r in read[:count])
    await s.create("/batch-epoch", b"")
    results = await s.multi_many(
        [
            [CheckVersionOp("/batch-epoch", 0), SetDataOp("/batch/0", b"new", 0)],
            [CheckVersionOp("/batch-epoch", 0), SetDataOp("/batch/1", b"stale", 7)],  # the znode moved
            [CreateOp("/batch/2")],  # exists
            [SetDataOp("/batch/3", b"new", 0), CreateOp("/batch/none/x")],  # parent missing: all undone
            [CheckVersionOp("/batch-epoch", 3), SetDataOp("/batch/4", b"new", 0)],  # the epoch moved
        ]
    )
    first = results[0]
    assert isinstance(first, list) and first[0] is None and first[1] is not None and first[1].version == 1
    assert isinstance(results[1], BadVersionError) and results[1].path == "/batch/1"
    assert isinstance(results[2], NodeExistsError)
    assert isinstance(results[3], NoNodeError)
    assert isinstance(results[4], BadVersionError) and results[4].path == "/batch-epoch"
    after = await s.get_many([f"/batch/{i}" for i in range(5)])
    assert [r[0] if r else None for r in after] == [b"new", b"1", b"2", b"3", b"4"]
    assert await s.get_many([]) == [] and await s.multi_many([]) == []


async def check_state_updates(s: CoordinationStore, count: int = 250) -> None:
    """Conditional partition state writes, many to a multi: each update gets its own outcome
    (one stale version fails alone, the rest of its chunk is written), and a moved controller
    epoch fails the batch with nothing written."""
    zk = KafkaZkClient(s)
    await s.create("/controller_epoch", b"1")
    await s.create("/brokers/topics/chunked", b"{}", makepath=True)
    await zk.create_partition_states("chunked", {p: LeaderAndIsr(1, 0, [1, 2], 1) for p in range(count)})
    tps = [TopicPartition("chunked", p) for p in range(count)]
    stale = count // 2 + 7  # inside a chunk, not at its edge
    updates = [(tp, LeaderAndIsr(2, 1, [2], 1), 5 if tp.partition == stale else 0) for tp in tps]
    results = await zk.update_leader_and_isrs(updates, controller_epoch_zk_version=0)
    assert [type(r).__name__ if not isinstance(r, int) else r for r in results] == [
        "BadVersionError" if p == stale else 1 for p in range(count)
    ]
    states = await zk.get_partition_states_of(tps)
    assert [(st.leader, st.zk_version) if st else None for st in states] == [
        (1, 0) if p == stale else (2, 1) for p in range(count)
    ]
    moved = [(tp, LeaderAndIsr(3, 2, [3], 1), 1) for tp in tps if tp.partition != stale]
    with pytest.raises(ControllerMovedError):
        await zk.update_leader_and_isrs(moved, controller_epoch_zk_version=4)
    assert {st.leader for st in await zk.get_partition_states_of(tps) if st} == {1, 2}
    isr_only = await zk.update_leader_and_isrs(moved[:150])  # a leader's ISR writes: no epoch check
    assert isr_only == [2] * 150
