"""The campaign's checker on hand-built histories: each anomaly is found where it is, none in a
clean history; unavailability windows per fault kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.checker import ANOMALIES, check, unavailability
from chaos.history import Ack, Fault, History, OffsetObservation, Poll, Send, Txn

T = "chaos"


def _clean(n: int = 6) -> History:
    """Producer p0 writes p0:0..n-1 to partition 0 at offsets 0..n-1; consumer c1 reads them in
    two polls; the final read sees them all; the group's committed offset only grows."""
    h = History()
    for i in range(n):
        h.sends.append(Send(f"p0:{i}", T, 0, float(i)))
        h.acks.append(Ack(f"p0:{i}", T, 0, i, float(i) + 0.5))
    records = [(T, 0, i, f"p0:{i}") for i in range(n)]
    h.polls.append(Poll("c1", 1, 10.0, tuple(records[:3])))
    h.polls.append(Poll("c1", 1, 11.0, tuple(records[3:])))
    h.final_reads.append(Poll("final", 0, 20.0, tuple(records)))
    h.offsets += [OffsetObservation("g", T, 0, 3, 10.5), OffsetObservation("g", T, 0, n, 11.5)]
    return h


def _found(h: History) -> dict[str, int]:
    return {k: v for k, v in check(h).counts.items() if v}


def test_a_clean_history_has_no_anomaly() -> None:
    result = check(_clean())
    assert result.valid, result.anomalies
    assert set(result.counts) == set(ANOMALIES)
    assert result.stats["acknowledged_and_read"] == 6


def test_lost_write_and_unseen() -> None:
    h = _clean()
    h.acks.append(Ack("p0:9", T, 0, 2, 3.0))  # acknowledged at offset 2, which holds p0:2
    h.acks.append(Ack("p0:10", T, 0, 6, 7.0))  # past everything read
    found = _found(h)
    assert found["lost-write"] == 1
    assert found["unseen"] == 1
    assert found["inconsistent-offsets"] == 1  # offset 2: p0:2 read, p0:9 acknowledged


def test_an_acknowledgement_without_an_offset_is_checked_for_being_read() -> None:
    """librdkafka delivers a record acknowledged by a later batch's success without its offset."""
    h = _clean()
    h.acks[2] = Ack("p0:2", T, 0, None, 2.5)  # read back: fine
    assert check(h).valid
    assert check(h).stats["acknowledged_without_offset"] == 1
    h.acks.append(Ack("p0:11", T, 0, None, 8.0))  # never read, though the partition was
    assert _found(h) == {"lost-write": 1}


def test_duplicate_and_inconsistent_offsets() -> None:
    h = _clean()
    h.final_reads.append(Poll("final", 0, 21.0, ((T, 0, 6, "p0:1"),)))
    assert _found(h) == {"duplicate": 1}
    h = _clean()
    h.final_reads.append(Poll("final", 0, 21.0, ((T, 0, 1, "p0:99"),)))
    assert _found(h)["inconsistent-offsets"] == 1


def test_reordering_inside_a_partition() -> None:
    h = History()
    for seq, offset in ((0, 0), (2, 1), (1, 2)):
        h.acks.append(Ack(f"p0:{seq}", T, 0, offset, 1.0))
    h.final_reads.append(Poll("final", 0, 5.0, ((T, 0, 0, "p0:0"), (T, 0, 1, "p0:2"), (T, 0, 2, "p0:1"))))
    assert _found(h) == {"reordering": 1}
    # another producer's values interleaved in any order are fine
    h.final_reads[0] = Poll("final", 0, 5.0, ((T, 0, 0, "p0:0"), (T, 0, 1, "q:5"), (T, 0, 2, "q:6")))
    h.acks[:] = [Ack("p0:0", T, 0, 0, 1.0)]
    assert _found(h) == {}


@pytest.mark.parametrize(
    ("polls", "kind"),
    [
        ([[0, 1], [3, 4, 5]], "poll-skip"),
        ([[0, 2], [3]], "int-poll-skip"),
        ([[0, 1, 2], [2, 3]], "nonmonotonic-poll"),
        ([[0, 2, 1]], "int-nonmonotonic-poll"),
    ],
)
def test_poll_skips_and_nonmonotonic_polls(polls: list[list[int]], kind: str) -> None:
    h = _clean()
    h.polls = [Poll("c1", 1, 10.0 + i, tuple((T, 0, o, f"p0:{o}") for o in offsets)) for i, offsets in enumerate(polls)]
    assert kind in _found(h)
    assert set(_found(h)) <= {kind, "int-poll-skip", "poll-skip"}


def test_a_new_assignment_may_rewind_and_gaps_in_offsets_are_not_skips() -> None:
    h = _clean()
    h.polls = [
        Poll("c1", 1, 10.0, ((T, 0, 0, "p0:0"), (T, 0, 1, "p0:1"), (T, 0, 2, "p0:2"))),
        Poll("c1", 2, 11.0, ((T, 0, 1, "p0:1"), (T, 0, 2, "p0:2"))),  # rebalanced: rewinds to the committed offset
    ]
    assert _found(h) == {}
    h = History()  # offsets 0, 2, 5 (markers in between): consecutive positions
    for seq, offset in enumerate((0, 2, 5)):
        h.acks.append(Ack(f"p0:{seq}", T, 0, offset, 1.0))
    records = tuple((T, 0, o, f"p0:{s}") for s, o in enumerate((0, 2, 5)))
    h.polls = [Poll("c1", 1, 2.0, records[:1]), Poll("c1", 1, 3.0, records[1:])]
    h.final_reads = [Poll("final", 0, 4.0, records)]
    assert _found(h) == {}


def test_aborted_and_uncommitted_reads_under_read_committed() -> None:
    h = History()
    h.txns = [
        Txn("t0", ["t:0", "t:1"], "committed", 1.0, 2.0, 2.1),
        Txn("t1", ["t:2", "t:3"], "aborted", 3.0, 4.0, 4.1),
    ]
    log = ((T, 0, 0, "t:0"), (T, 1, 0, "t:1"), (T, 0, 2, "t:2"), (T, 1, 2, "t:3"))
    h.final_reads = [Poll("final", 0, 9.0, (log[0], log[1]))]
    assert _found(h) == {}
    h.polls = [Poll("c1", 1, 1.5, (log[0],))]  # read before t0's commit was asked
    assert _found(h) == {"uncommitted-read": 1}
    h.polls = [Poll("c1", 1, 5.0, (log[2],))]
    assert _found(h) == {"aborted-read": 1}
    h.polls = [Poll("c1", 1, 5.0, (log[2],), read_committed=False)]  # read_uncommitted may read it
    assert _found(h) == {}
    h.final_reads = [Poll("final", 0, 9.0, (log[0],))]  # t:1 of the committed t0 never read
    assert _found(h) == {"unseen": 1}


def test_read_committed_does_not_skip_over_aborted_records() -> None:
    h = History()
    h.txns = [Txn("t1", ["t:1"], "aborted", 1.0, 1.5, 1.6)]
    h.acks = [Ack("p0:0", T, 0, 0, 1.0), Ack("t:1", T, 0, 1, 1.2), Ack("p0:1", T, 0, 3, 2.0)]
    records = ((T, 0, 0, "p0:0"), (T, 0, 3, "p0:1"))
    h.polls = [Poll("c1", 1, 3.0, records[:1]), Poll("c1", 1, 4.0, records[1:])]
    h.final_reads = [Poll("final", 0, 5.0, records)]
    assert _found(h) == {}  # the aborted record, acknowledged at offset 1, is neither lost nor skipped
    h.polls.append(Poll("u", 1, 2.5, ((T, 0, 0, "p0:0"), (T, 0, 3, "p0:1")), read_committed=False))
    assert _found(h) == {"int-poll-skip": 1}  # a read_uncommitted consumer must return it


def test_g0_write_cycle_between_committed_transactions() -> None:
    h = History()
    h.txns = [Txn("a", ["a:0", "a:1"], "committed"), Txn("b", ["b:0", "b:1"], "committed")]
    h.final_reads = [Poll("final", 0, 9.0, ((T, 0, 0, "a:0"), (T, 0, 1, "b:0"), (T, 1, 0, "b:1"), (T, 1, 1, "a:1")))]
    assert _found(h) == {"g0": 1}
    h.final_reads = [Poll("final", 0, 9.0, ((T, 0, 0, "a:0"), (T, 0, 1, "b:0"), (T, 1, 0, "a:1"), (T, 1, 1, "b:1")))]
    assert _found(h) == {}


def test_committed_offsets_going_backwards() -> None:
    h = _clean()
    h.offsets.append(OffsetObservation("g", T, 0, 2, 12.0))
    assert _found(h) == {"offsets-backwards": 1}


def test_unavailability_per_fault_kind() -> None:
    h = History()
    # partition 0 acknowledges within 0.1 s except between 10 and 16.5 s; partition 1 always
    for i in range(200):
        t = i * 0.1
        h.sends += [Send(f"p0:{i}", T, 0, t), Send(f"p1:{i}", T, 1, t)]
        h.acks.append(Ack(f"p1:{i}", T, 1, i, t + 0.05))
        h.acks.append(Ack(f"p0:{i}", T, 0, i, 16.5 if 10.0 <= t <= 16.5 else t + 0.05))
    h.faults = [Fault("kill-leader", "b1", 10.0, 12.0), Fault("kill-leader", "b2", 18.0, 19.0)]
    summary = unavailability(h)["per_kind"]["kill-leader"]
    assert summary["faults"] == 2
    assert summary["max_s"] == pytest.approx(6.5, abs=0.01)
    assert summary["median_s"] == pytest.approx((6.5 + 0.05) / 2, abs=0.01)
    h.faults.append(Fault("kill-follower", "b3", 10.0, 12.0, partition=(T, 1)))  # aimed at partition 1 only
    per_fault = unavailability(h)["per_fault"][-1]
    assert per_fault["window_s"] == pytest.approx(0.05, abs=0.01)
    assert per_fault["window_all_s"] == pytest.approx(6.5, abs=0.01)
    h.faults.append(Fault("zk-restart", "zk", 25.0))  # nothing sent after 20 s
    assert unavailability(h)["per_kind"]["zk-restart"]["never_recovered"] == 1


def test_unavailability_reports_when_a_new_leader_was_named() -> None:
    h = History()
    for i in range(100):
        h.sends.append(Send(f"p0:{i}", T, 0, i * 0.1))
        h.acks.append(Ack(f"p0:{i}", T, 0, i, max(i * 0.1, 8.0) + 0.05 if i * 0.1 >= 1.0 else i * 0.1 + 0.05))
    h.faults = [Fault("kill-leader", "b1", 1.0, 3.0, elected_s=6.2)]
    summary = unavailability(h)["per_kind"]["kill-leader"]
    assert summary["max_s"] == pytest.approx(7.05, abs=0.01)
    assert (summary["election_median_s"], summary["election_max_s"]) == (6.2, 6.2)


def test_the_report_files(tmp_path: Path) -> None:
    from chaos.campaign import CampaignConfig, CampaignResult
    from chaos.report import write_report

    h = _clean()
    h.faults = [Fault("kill-leader", "b1", 1.0, 3.0, elected_s=2.5), Fault("zk-restart", "zk", 4.0, None)]
    h.acks.append(Ack("p0:9", T, 0, 2, 3.0))
    result = CampaignResult(CampaignConfig(minutes=0.1, seed=5, brokers=3), h, check(h), unavailability(h), 12.0)
    paths = write_report(result, tmp_path)
    text = paths["text"].read_text()
    assert text.startswith("odradek fault campaign: ANOMALIES FOUND")
    assert "lost-write               1" in text and "new leader after 2.500 s" in text
    report = json.loads(paths["json"].read_text())
    assert report["check"]["counts"]["lost-write"] == 1 and not report["valid"]
    assert paths["timeline"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_epoch_bumps_are_found_in_the_producers_librdkafka_logs(tmp_path: Path) -> None:
    from chaos.workloads import epoch_bumps

    (tmp_path / "p0.1.librdkafka.log").write_text(
        "08:29:11.118 DRAIN [rdkafka#producer-4] [thrd:b1]: chaos [2] beginning partition drain:"
        " drain before retrying\n"
        "08:29:41.300 DRAIN [rdkafka#producer-4] [thrd:main]: Beginning partition drain in state Assigned"
        " for PID{Id:1000,Epoch:0} epoch bump for 6 partition(s) with in-flight requests: unknown producer id\n"
        "08:29:42.700 DRAIN [rdkafka#producer-4] [thrd:main]: All partitions drained,"
        " bumped epoch to PID{Id:1000,Epoch:1}\n"
    )
    (tmp_path / "p1.1.librdkafka.log").write_text("08:29:11.118 MSGSET nothing to see\n")
    found = epoch_bumps(tmp_path)
    assert len(found) == 2
    assert found[0].startswith("p0.1.librdkafka.log: 08:29:41.300") and found[0].endswith("unknown producer id")
    assert "bumped epoch to PID{Id:1000,Epoch:1}" in found[1]
