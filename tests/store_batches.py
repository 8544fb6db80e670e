"""The batch verbs of the coordination store contract (``get_many``, ``multi_many``), checked the
same way against the embedded store (tests/unit) and a real ZooKeeper (tests/integration)."""

from __future__ import annotations

from odradek.metadata.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.metadata.store import CheckVersionOp, CoordinationStore, CreateOp, SetDataOp


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
