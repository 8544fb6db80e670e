"""G0 and G1c on hand-built transactional histories: consume-transform-produce transactions
whose reads give write-read edges, with and without a cycle."""

from __future__ import annotations

from chaos.checker import check
from chaos.cycles import dependency_edges, find_cycles, strongly_connected
from chaos.history import History, Poll, Txn

A, B = "chaos-txn", "chaos-ctp"


def _history(log_b: list[tuple[int, str]], reads: dict[str, list[str]]) -> History:
    """Transaction ``t0`` writes ``t:0`` to topic A; transactions ``x0``, ``x1`` (consume-transform-
    produce) write ``x:0`` / ``x:1`` to topic B at the offsets of ``log_b`` and read ``reads``."""
    h = History()
    h.txns = [
        Txn("t0", ["t:0"], "committed", 0.0, 0.5, 0.6),
        Txn("x0", ["x:0"], "committed", 1.0, 1.5, 1.6, reads=reads.get("x0", [])),
        Txn("x1", ["x:1"], "committed", 2.0, 2.5, 2.6, reads=reads.get("x1", [])),
    ]
    h.final_reads = [
        Poll("final", 0, 9.0, ((A, 0, 0, "t:0"),)),
        Poll("final", 0, 9.0, tuple((B, 0, offset, value) for offset, value in log_b)),
    ]
    return h


def _counts(h: History) -> dict[str, int]:
    return {k: v for k, v in check(h).counts.items() if v and k in ("g0", "g1c")}


def test_reads_of_earlier_transactions_make_no_cycle() -> None:
    h = _history([(0, "x:0"), (1, "x:1")], {"x0": ["t:0"], "x1": ["x:0"]})
    ww, wr = dependency_edges(h)
    assert dict(ww) == {"x0": {"x1"}}
    assert dict(wr) == {"t0": {"x0"}, "x0": {"x1"}}
    assert _counts(h) == {}


def test_a_read_of_a_later_transaction_is_g1c() -> None:
    # x0 precedes x1 in B's log (ww x0 -> x1) but consumed x1's record (wr x1 -> x0)
    h = _history([(0, "x:0"), (1, "x:1")], {"x0": ["t:0", "x:1"]})
    assert _counts(h) == {"g1c": 1}
    (example,) = find_cycles(h)["g1c"]
    assert example["cycle"] == ["x1", "x0", "x1"]
    assert example["edges"] == ["wr", "ww"]


def test_write_read_cycle_without_write_order() -> None:
    # x0 and x1 each consumed the other's record: a cycle of wr edges only
    h = _history([(0, "x:0"), (1, "x:1")], {"x0": ["x:1"], "x1": ["x:0"]})
    assert _counts(h) == {"g1c": 1}


def test_reads_of_aborted_or_unknown_transactions_give_no_edge() -> None:
    h = _history([(0, "x:0"), (1, "x:1")], {"x0": ["x:1"]})
    h.txns[2].outcome = "aborted"  # aborted-read reports that one, not a dependency
    assert dependency_edges(h)[1] == {}
    assert _counts(h) == {}


def test_g0_is_reported_apart_from_g1c() -> None:
    h = History()
    h.txns = [Txn("a", ["a:0", "a:1"], "committed"), Txn("b", ["b:0", "b:1"], "committed", reads=["a:0"])]
    h.final_reads = [Poll("final", 0, 9.0, ((A, 0, 0, "a:0"), (A, 0, 1, "b:0"), (A, 1, 0, "b:1"), (A, 1, 1, "a:1")))]
    # ww a -> b and b -> a (g0); the wr a -> b lies in the same component, so it is g1c as well
    assert _counts(h) == {"g0": 1, "g1c": 1}


def test_strongly_connected_components() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}}) == []
