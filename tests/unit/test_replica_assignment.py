"""Replica placement matches Kafka's AdminUtils, rack-unaware and rack-aware."""

from __future__ import annotations

import pytest

from odradek.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from odradek.server.replica_assignment import assign_replicas, rack_alternated

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_round_robin_with_a_growing_shift() -> None:
    assignment = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0)
    assert assignment == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_alternated_broker_list() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_spreads_each_partition_over_racks() -> None:
    assignment = assign_replicas(sorted(RACKS), 7, 3, start_index=0, racks=RACKS)
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    for replicas in assign_replicas(sorted(RACKS), 60, 3, racks=RACKS).values():
        assert len({RACKS[b] for b in replicas}) == 3 and len(set(replicas)) == 3


def test_more_replicas_than_racks_still_uses_every_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas([1, 2, 3, 4], 20, 3, racks=racks).values():
        assert {racks[b] for b in replicas} == {"a", "b"} and len(set(replicas)) == 3


def test_refusals() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="Not all brokers have rack information"):
        assign_replicas([0, 1], 1, 2, racks={0: "a", 1: None})
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas([0, 1], 1, 3)
