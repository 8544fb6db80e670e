"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx: RequestContext) -> response | bytes | None``.

``API_HANDLERS`` maps API key to module; ApiVersions answers from it, and
``docs/compatibility.md`` is checked against it by a unit test.

Advertised versions are one Kafka release: every served API's maximum is Kafka 3.9's
(``KAFKA_3_9_VERSIONS``, from 3.9's message specs; clients infer the broker's release from the
maxima). Minima are Kafka 3.9's too, except where the protocol library has no codec for the
oldest versions: there they are Kafka 4.0's (KIP-896 removed Produce v0-2, Fetch v0-3,
ListOffsets v0, CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0, DescribeLogDirs v0,
OffsetForLeaderEpoch v0-1, WriteTxnMarkers v0 and AlterReplicaLogDirs v0). A unit test holds
the registry to this table.
"""

from __future__ import annotations

from types import ModuleType

from odradek.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    api_versions,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)

_MODULES: list[ModuleType] = [
    produce,
    describe_producers,
    describe_transactions,
    list_transactions,
    write_txn_markers,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    leader_and_isr,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    api_versions,
    init_producer_id,
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    describe_log_dirs,
    alter_replica_log_dirs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
]

API_HANDLERS: dict[int, ModuleType] = {m.API_KEY: m for m in _MODULES}

KAFKA_RELEASE = "3.9"
KAFKA_3_9_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    4: (0, 7),  # LeaderAndIsr
    5: (0, 4),  # StopReplica
    6: (0, 8),  # UpdateMetadata
    7: (0, 3),  # ControlledShutdown
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    27: (0, 1),  # WriteTxnMarkers
    28: (0, 4),  # TxnOffsetCommit
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    60: (0, 1),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
}
"""(min, max) of each API Kafka 3.9's ZooKeeper-mode broker serves that odradek serves too."""

KAFKA_4_0_MINIMA: dict[int, int] = {0: 3, 1: 4, 2: 1, 19: 2, 20: 1, 23: 2, 27: 1, 32: 1, 34: 1, 35: 1}
"""Where odradek's minimum is above 3.9's: Kafka 4.0's minimum (KIP-896)."""
