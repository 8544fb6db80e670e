"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx: RequestContext) -> response | bytes | None``.

``API_HANDLERS`` maps API key to module; ApiVersions answers from it, and
``docs/compatibility.md`` is checked against it by a unit test.

Advertised versions are one Kafka release: every served API's maximum is Kafka 3.9's
(``KAFKA_3_9_VERSIONS``, from 3.9's message specs; clients infer the broker's release from the
maxima), but for the Kafka 4 group APIs (``KAFKA_4_GROUP_VERSIONS``: the consumer and share group
APIs), which 3.9 does not have.
Minima are Kafka 3.9's too, except where the protocol library has no codec for the
oldest versions: there they are Kafka 4.0's (KIP-896 removed Produce v0-2, Fetch v0-3,
ListOffsets v0, CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0, DescribeLogDirs v0,
DescribeAcls v0, CreateAcls v0, DeleteAcls v0, OffsetForLeaderEpoch v0-1, WriteTxnMarkers v0 and
AlterReplicaLogDirs v0). A unit test holds
the registry to this table.
"""

from __future__ import annotations

from types import ModuleType

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
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
    sasl_authenticate,
    sasl_handshake,
    share_group_describe,
    share_group_heartbeat,
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
    alter_client_quotas,
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
    describe_client_quotas,
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
    consumer_group_heartbeat,
    consumer_group_describe,
    share_group_heartbeat,
    share_group_describe,
    sasl_handshake,
    sasl_authenticate,
    describe_acls,
    create_acls,
    delete_acls,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_client_quotas,
    alter_client_quotas,
]

API_HANDLERS: dict[int, ModuleType] = {m.API_KEY: m for m in _MODULES}

KAFKA_RELEASE = "3.9"
KAFKA_3_9_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}
"""(min, max) of each API Kafka 3.9's ZooKeeper-mode broker serves that odradek serves too."""

KAFKA_4_0_MINIMA: dict[int, int] = {
    ApiKey.PRODUCE: 3,
    ApiKey.FETCH: 4,
    ApiKey.LIST_OFFSETS: 1,
    ApiKey.CREATE_TOPICS: 2,
    ApiKey.DELETE_TOPICS: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.DESCRIBE_CONFIGS: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
}
"""Where odradek's minimum is above 3.9's: Kafka 4.0's minimum (KIP-896)."""

KAFKA_4_GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
}
"""(min, max) of the Kafka 4.x group APIs odradek serves (KIP-848 consumer groups, KIP-932 share
groups), from Kafka 4.2's message specs (the share APIs' v0 was early access, removed in 4.1);
Kafka serves them in KRaft mode only, odradek beside its ZooKeeper-era APIs."""

SERVED_VERSIONS: dict[int, tuple[int, int]] = {**KAFKA_3_9_VERSIONS, **KAFKA_4_GROUP_VERSIONS}
"""Every API odradek may serve, with the Kafka release's (min, max) it follows."""
