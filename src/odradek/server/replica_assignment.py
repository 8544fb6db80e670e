"""Where new partitions' replicas go (Kafka's ``AdminUtils.assignReplicasToBrokers``).

Rack-unaware (no broker has ``broker.rack``): partitions round-robin over the brokers sorted by
id from a random start, each partition's other replicas on the following brokers with a shift
that grows every time the partitions wrap around the broker list, so leaders and followers both
spread evenly.

Rack-aware (every broker has a rack): the same walk over a rack-alternated broker list (first
broker of each rack in rack order, then the second of each, ...), where a replica skips a broker
whose rack already holds one of the partition's replicas while some rack holds none, and a
broker already holding one while some broker holds none: replicas land on as many racks as
possible. Some brokers with a rack and some without is refused, as Kafka does.

Pure functions: any thread.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from odradek.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError


def _replica_index(first: int, shift: int, k: int, n: int) -> int:
    return (first + 1 + (shift + k) % max(n - 1, 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack: the first broker (by id) of each rack, then the second, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(racks):
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out += [brokers[depth] for _, brokers in sorted(by_rack.items()) if depth < len(brokers)]
        depth += 1
    return out


def check_replication_factor(replication_factor: int, brokers: int) -> None:
    """Raise InvalidReplicationFactorError when ``replication_factor`` exceeds ``brokers``."""
    if replication_factor > brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {brokers}."
        )


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_partition: int = 0,
    start_index: int | None = None,
    racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """Replicas for partitions ``start_partition .. + partitions - 1``; ``start_index`` fixes the
    random start (and shift) for tests and tools; ``racks`` maps broker id to ``broker.rack``."""
    n = len(brokers)
    check_replication_factor(replication_factor, n)
    known = {b: r for b, r in (racks or {}).items() if b in brokers and r is not None}
    if known and len(known) != n:
        raise InvalidReplicaAssignmentError("Not all brokers have rack information for replica rack aware assignment.")
    ordered = rack_alternated(known) if known else sorted(brokers)
    rack_count = len(set(known.values()))
    start = random.randrange(n) if start_index is None else start_index
    shift = random.randrange(n) if start_index is None else 0
    assignment: dict[int, list[int]] = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [ordered[first]]
        if not known:
            replicas += [ordered[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            used_racks = {known[ordered[first]]}
            k = 0
            while len(replicas) < replication_factor:
                broker = ordered[_replica_index(first, shift * rack_count, k, n)]
                k += 1
                rack_ok = known[broker] not in used_racks or len(used_racks) == rack_count
                broker_ok = broker not in replicas or len(replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    used_racks.add(known[broker])
        assignment[p] = replicas
    return assignment
