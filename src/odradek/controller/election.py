"""Leader election rules as pure functions (Kafka's ``Election`` / ``PartitionLeaderElectionAlgorithms``).

Each takes the partition's assignment (replica list, first = preferred leader), its ISR and the
live brokers, and returns the new leader or None when no eligible replica is alive.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def offline_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean: bool
) -> int | None:
    """First live replica of the assignment that is in the ISR; if none and ``unclean``, the
    first live replica at all (data loss accepted); else None."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> tuple[int, list[int]] | None:
    """For a new partition: leader = first live replica, ISR = every live replica (in assignment order)."""
    isr = [r for r in assignment if r in live]
    return (isr[0], isr) if isr else None


def controlled_shutdown_leader_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    """First replica in the ISR that is alive and not shutting down."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


def preferred_replica_leader_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """The preferred (first) replica if it is alive and in the ISR, else None."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def reassign_partition_leader_election(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """For a completed reassignment: the first replica of the target assignment that is alive and
    in the ISR (Kafka's ``reassignPartitionLeaderElection``)."""
    for replica in target:
        if replica in live and replica in isr:
            return replica
    return None
