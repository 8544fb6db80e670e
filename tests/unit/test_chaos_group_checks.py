"""The campaign's checks of Kafka 4's groups on hand-built histories: partition ownership of a
consumer-protocol group (KIP-848) and a share group's deliveries and acknowledgements (KIP-932),
each anomaly found where it is and not where it is not; the workloads' bookkeeping without a broker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from chaos.checker import ANOMALIES, check, unavailability
from chaos.group_checks import GROUP_ANOMALIES, ownership_intervals
from chaos.history import Ack, AssignmentChange, Fault, History, Poll, Send, ShareAck, ShareDelivery

T = "chaos"
S = "chaos-share"
G = "cp"
SG = "sg"


def _found(h: History) -> dict[str, int]:
    return {k: v for k, v in check(h).counts.items() if v}


def _owned(h: History, consumer: str, kind: str, t: float, *partitions: int) -> None:
    h.assignments.append(AssignmentChange(consumer, G, kind, t, tuple((T, p) for p in partitions)))


def _ownership() -> History:
    """c0 owns partitions 0 and 1, gives 1 up at 5.0; c1 is assigned it at 5.2; both close at 10."""
    h = History()
    _owned(h, "c0", "assigned", 1.0, 0, 1)
    _owned(h, "c0", "revoked", 5.0, 1)
    _owned(h, "c1", "assigned", 5.2, 1)
    _owned(h, "c0", "closed", 10.0, 0)
    _owned(h, "c1", "closed", 10.0, 1)
    return h


def _delivered(
    h: History, consumer: str, value: str, offset: int, t: float, count: int | None, kind: str, outcome: str
) -> ShareAck:
    h.share_deliveries.append(ShareDelivery(consumer, SG, S, 0, offset, value, t, count))
    ack = ShareAck(consumer, SG, S, 0, offset, value, kind, t + 0.01, outcome, t + 0.05)
    h.share_acks.append(ack)
    return ack


def _share() -> History:
    """s0:0..2 produced to chaos-share partition 0; s0:0 accepted by sh0; s0:1 released by sh1,
    then accepted by sh0 on its second delivery; s0:2 rejected by sh1; the final read sees all."""
    h = History()
    h.share_groups = {SG: [S]}
    h.share_record_lock_duration_ms = 15000
    for i in range(3):
        h.sends.append(Send(f"s0:{i}", S, 0, float(i)))
        h.acks.append(Ack(f"s0:{i}", S, 0, i, float(i) + 0.1))
    _delivered(h, "sh0", "s0:0", 0, 3.0, 1, "accept", "confirmed")
    _delivered(h, "sh1", "s0:1", 1, 3.0, 1, "release", "confirmed")
    _delivered(h, "sh0", "s0:1", 1, 3.5, 2, "accept", "confirmed")
    _delivered(h, "sh1", "s0:2", 2, 3.6, 1, "reject", "confirmed")
    h.final_reads.append(Poll("final", 0, 9.0, tuple((S, 0, i, f"s0:{i}") for i in range(3))))
    return h


def test_clean_group_histories_have_no_anomaly() -> None:
    for h in (_ownership(), _share()):
        result = check(h)
        assert result.valid, result.anomalies
        assert set(GROUP_ANOMALIES) <= set(result.counts) == set(ANOMALIES)
    stats = check(_share()).stats["share"]
    assert (stats["deliveries"], stats["records_delivered"], stats["redeliveries"]) == (4, 3, 1)
    assert stats["max_delivery_count"] == 2
    assert stats["acks"] == {"accept": {"confirmed": 2}, "release": {"confirmed": 1}, "reject": {"confirmed": 1}}


def test_ownership_intervals() -> None:
    h = _ownership()
    _owned(h, "c2", "assigned", 11.0, 2)  # never given up
    spans = {(o.consumer, o.partition[1]): (o.start, o.end, o.ended_by) for o in ownership_intervals(h)}
    assert spans == {
        ("c0", 0): (1.0, 10.0, "closed"),
        ("c0", 1): (1.0, 5.0, "revoked"),
        ("c1", 1): (5.2, 10.0, "closed"),
        ("c2", 2): (11.0, None, None),
    }


def test_partition_owned_twice() -> None:
    h = _ownership()
    h.assignments[2] = AssignmentChange("c1", G, "assigned", 4.0, ((T, 1),))  # before c0 let it go
    assert _found(h) == {"partition-owned-twice": 1}
    example = check(h).anomalies["partition-owned-twice"][0]
    assert example["partition"] == [T, 1] and example["overlap_s"] == 1.0
    assert [o["consumer"] for o in example["owners"]] == ["c0", "c1"]
    h.assignments[2] = AssignmentChange("c1", G, "assigned", 4.97, ((T, 1),))  # within the tolerance
    assert _found(h) == {}


def test_an_interval_never_ended_overlaps_every_later_owner() -> None:
    h = _ownership()
    del h.assignments[1]  # c0 never learned partition 1 was taken away (nor closed it)
    h.assignments[-2] = AssignmentChange("c0", G, "closed", 10.0, ((T, 0),))
    assert _found(h) == {"partition-owned-twice": 1}
    assert check(h).anomalies["partition-owned-twice"][0]["overlap_s"] == pytest.approx(4.8)


def test_a_lost_partition_overlapping_its_next_owner_is_not_an_anomaly() -> None:
    """A fenced member learns it lost its partitions only when it hears from the coordinator, which
    may have handed them on already: counted, not reported."""
    h = _ownership()
    h.assignments[1] = AssignmentChange("c0", G, "lost", 8.0, ((T, 1),))
    result = check(h)
    assert result.valid, result.anomalies
    assert result.stats["ownership"]["owned_twice_until_lost"] == 1
    assert result.stats["ownership"]["owned_twice_until_lost_max_s"] == pytest.approx(2.8)
    assert result.stats["ownership"]["lost"] == 1


def test_members_of_other_groups_and_the_same_member_do_not_overlap() -> None:
    h = _ownership()
    h.assignments.append(AssignmentChange("c9", "other", "assigned", 2.0, ((T, 1),)))
    _owned(h, "c0", "assigned", 2.0, 0)  # assigned again what it owns: nothing changes
    assert _found(h) == {}


@pytest.mark.parametrize("kind", ["accept", "reject"])
def test_a_confirmed_accept_or_reject_redelivered(kind: str) -> None:
    h = _share()
    anomaly = f"share-{kind}ed-redelivered"
    h.share_acks[0].kind = kind
    _delivered(h, "sh1", "s0:0", 0, 20.0, 2, "accept", "confirmed")  # after the lock would have run out
    assert _found(h) == {anomaly: 1}
    example = check(h).anomalies[anomaly][0]
    assert (example["acknowledged_by"], example["delivered_again_to"], example["delivered_again_count"]) == (
        "sh0",
        "sh1",
        2,
    )
    for outcome in ("failed", "pending"):  # only what the broker confirmed promises anything
        h.share_acks[0].outcome = outcome
        assert _found(h) == {}


def test_redelivery_by_time_when_deliveries_carry_no_count() -> None:
    h = _share()
    h.share_deliveries[0] = ShareDelivery("sh0", SG, S, 0, 0, "s0:0", 3.0, None)
    _delivered(h, "sh1", "s0:0", 0, 2.9, None, "accept", "pending")
    _delivered(h, "sh1", "s0:0", 0, 3.2, None, "accept", "pending")  # may be an earlier acquisition, seen late
    assert _found(h) == {}
    _delivered(h, "sh1", "s0:0", 0, 18.1, None, "accept", "pending")  # a record lock after the confirmation (3.05)
    assert _found(h) == {"share-accepted-redelivered": 1}


def test_an_earlier_acquisition_seen_late_is_no_redelivery() -> None:
    """A leader about to learn it was replaced hands s0:1 out (count 1) while the new leader,
    which took its state over, delivers it with count 2 and has it accepted; the first copy
    reaches its consumer after that acceptance, and its own acknowledgement fails."""
    h = _share()
    _delivered(h, "sh2", "s0:1", 1, 4.0, 1, "accept", "failed")
    _delivered(h, "sh2", "s0:0", 0, 4.0, 1, "accept", "failed")  # the same count again, also seen late
    assert _found(h) == {}


def test_a_share_partition_counting_from_1_again_redelivers() -> None:
    """A new leader that lost the share-partition's state delivers accepted records again, their
    delivery counts starting over: found once a record lock has passed since the acceptance."""
    h = _share()
    _delivered(h, "sh2", "s0:0", 0, 30.0, 1, "accept", "confirmed")
    _delivered(h, "sh2", "s0:1", 1, 30.0, 1, "accept", "confirmed")
    assert _found(h) == {"share-accepted-redelivered": 2}


def test_share_never_delivered() -> None:
    h = _share()
    h.sends.append(Send("s0:3", S, 0, 3.0))
    h.acks.append(Ack("s0:3", S, 0, 3, 3.1))
    h.final_reads.append(Poll("final", 0, 9.0, ((S, 0, 3, "s0:3"),)))
    assert _found(h) == {"share-never-delivered": 1}
    assert check(h).anomalies["share-never-delivered"][0]["value"] == "s0:3"
    h.share_groups = {}  # a topic no share group reads
    assert _found(h) == {}


def test_share_over_delivered() -> None:
    h = _share()
    h.share_delivery_count_limit = 2
    assert _found(h) == {}  # s0:1 delivered twice: at the limit
    h.share_acks[2].kind = "release"
    _delivered(h, "sh1", "s0:1", 1, 4.0, None, "accept", "confirmed")
    assert _found(h) == {"share-over-delivered": 1}
    h = _share()
    h.share_delivery_count_limit = 2
    h.share_deliveries[2] = ShareDelivery("sh0", SG, S, 0, 1, "s0:1", 3.5, 3)  # the broker's count says so
    assert _found(h) == {"share-over-delivered": 1}


def test_a_share_delivery_of_a_wrong_value_is_an_inconsistent_offset() -> None:
    h = _share()
    h.share_deliveries.append(ShareDelivery("sh2", SG, S, 0, 2, "s0:9", 5.0, 2))
    assert _found(h)["inconsistent-offsets"] == 1


def test_unavailability_leaves_the_share_topic_out() -> None:
    h = History()
    h.share_groups = {SG: [S]}
    for i in range(50):
        h.sends += [Send(f"p0:{i}", T, 0, i * 0.1), Send(f"s0:{i}", S, 0, i * 0.1)]
        h.acks += [Ack(f"p0:{i}", T, 0, i, i * 0.1 + 0.05), Ack(f"s0:{i}", S, 0, i, 9.0)]
    h.faults = [Fault("zk-restart", "zk", 1.0, 2.0)]
    assert unavailability(h)["per_fault"][0]["window_s"] == pytest.approx(0.05, abs=0.01)


def test_share_ack_choice_is_deterministic_and_in_proportion() -> None:
    from chaos.group_workloads import share_ack_choice

    choices = Counter(share_ack_choice(7, f"s0.1:{i}", 1) for i in range(20_000))
    assert 0.015 < choices["reject"] / 20_000 < 0.025
    assert 0.04 < choices["release"] / 20_000 < 0.06
    assert share_ack_choice(7, "s0.1:5", 1) == share_ack_choice(7, "s0.1:5", 1)
    released = [f"s0.1:{i}" for i in range(2000) if share_ack_choice(7, f"s0.1:{i}", 1) == "release"]
    assert sum(share_ack_choice(7, v, 2) == "accept" for v in released) > 0.8 * len(released)


def test_the_share_workload_records_the_brokers_answers() -> None:
    """The acknowledgement-commit callback confirms by offset; an error wins over a success."""
    from chaos.group_workloads import ShareGroupWorkload

    h = History()
    w = ShareGroupWorkload(h, "127.0.0.1:1", [S], SG, "sh0")
    acks = [ShareAck("sh0", SG, S, 0, o, f"s0:{o}", "accept", 1.0) for o in range(3)]
    h.share_acks += acks
    for ack in acks:
        w._pending[(S, 0, ack.offset)] = ack
    w._committed({TopicPartition(S, 0): {0, 1}}, None)
    assert [a.outcome for a in acks] == ["confirmed", "confirmed", "pending"]
    w._committed({TopicPartition(S, 0): {2}}, RuntimeError("INVALID_RECORD_STATE"))
    assert acks[2].outcome == "failed" and acks[2].error == "INVALID_RECORD_STATE"
    w._resolve(acks[0], RuntimeError("late error"), 2.0)  # e.g. commit_sync's result disagrees
    assert acks[0].outcome == "failed"
    w._resolve(acks[2], None, 2.0)
    assert acks[2].outcome == "failed"
    assert w._pending == {}


def test_the_consumer_protocol_workload_numbers_each_ownership() -> None:
    from chaos.group_workloads import ConsumerProtocolGroupWorkload

    h = History()
    w = ConsumerProtocolGroupWorkload(h, "127.0.0.1:1", [T], G, "cp0")
    w._change("assigned", [TopicPartition(T, 0), TopicPartition(T, 1)])
    w._change("assigned", [])  # librdkafka may call with nothing: not recorded
    w._change("revoked", [TopicPartition(T, 1)])
    w._change("assigned", [TopicPartition(T, 1)])
    assert [(a.kind, a.partitions) for a in h.assignments] == [
        ("assigned", ((T, 0), (T, 1))),
        ("revoked", ((T, 1),)),
        ("assigned", ((T, 1),)),
    ]
    assert w.owned == {(T, 0): 1, (T, 1): 3}  # partition 0 kept its session across 1's moves
    w.closing = True
    w._change("lost", [TopicPartition(T, 0)])
    assert len(h.assignments) == 3


def test_the_report_shows_the_groups(tmp_path: Path) -> None:
    from chaos.campaign import CampaignConfig, CampaignResult
    from chaos.report import write_report

    h = _share()
    h.assignments = _ownership().assignments
    _delivered(h, "sh1", "s0:0", 0, 20.0, 2, "accept", "confirmed")
    result = CampaignResult(CampaignConfig(minutes=0.1, seed=5, brokers=3), h, check(h), unavailability(h), 12.0)
    text = write_report(result, tmp_path)["text"].read_text()
    assert "  share-accepted-redelivered 1\n" in text
    assert "share group: deliveries 5 by consumer {'sh0': 2, 'sh1': 3}" in text
    assert "consumer-protocol group: assignment changes {'assigned': 2, 'revoked': 1, 'lost': 0, 'closed': 2}" in text
