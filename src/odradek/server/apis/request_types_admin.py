"""The request bodies of the admin, cluster, SASL and replication APIs the handlers of
:mod:`odradek.server.apis` serve, as unions over the generated request classes of each API's served
versions (``MIN_VERSION``..``MAX_VERSION``), as in :mod:`odradek.server.apis.request_types`.

The nested request entities the handlers' helpers take (a topic to create or grow, a config
resource, a client quota entry, entity or filter component) are unions over the same versions, at
the end.

Handlers import this module for annotations only (under ``TYPE_CHECKING``).
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.alter_client_quotas import v0 as alter_client_quotas_v0
from kio.schema.alter_client_quotas import v1 as alter_client_quotas_v1
from kio.schema.alter_client_quotas.v0 import request as alter_client_quotas_v0_request
from kio.schema.alter_client_quotas.v1 import request as alter_client_quotas_v1_request
from kio.schema.alter_configs.v0 import request as alter_configs_v0_request
from kio.schema.alter_configs.v1 import request as alter_configs_v1_request
from kio.schema.alter_configs.v2 import request as alter_configs_v2_request
from kio.schema.alter_partition_reassignments import v0 as alter_partition_reassignments_v0
from kio.schema.alter_replica_log_dirs import v1 as alter_replica_log_dirs_v1
from kio.schema.alter_replica_log_dirs import v2 as alter_replica_log_dirs_v2
from kio.schema.alter_user_scram_credentials import v0 as alter_user_scram_credentials_v0
from kio.schema.api_versions import v0 as api_versions_v0
from kio.schema.api_versions import v1 as api_versions_v1
from kio.schema.api_versions import v2 as api_versions_v2
from kio.schema.api_versions import v3 as api_versions_v3
from kio.schema.api_versions import v4 as api_versions_v4
from kio.schema.create_partitions import v0 as create_partitions_v0
from kio.schema.create_partitions import v1 as create_partitions_v1
from kio.schema.create_partitions import v2 as create_partitions_v2
from kio.schema.create_partitions import v3 as create_partitions_v3
from kio.schema.create_partitions.v0 import request as create_partitions_v0_request
from kio.schema.create_partitions.v1 import request as create_partitions_v1_request
from kio.schema.create_partitions.v2 import request as create_partitions_v2_request
from kio.schema.create_partitions.v3 import request as create_partitions_v3_request
from kio.schema.create_topics.v2 import request as create_topics_v2_request
from kio.schema.create_topics.v3 import request as create_topics_v3_request
from kio.schema.create_topics.v4 import request as create_topics_v4_request
from kio.schema.create_topics.v5 import request as create_topics_v5_request
from kio.schema.create_topics.v6 import request as create_topics_v6_request
from kio.schema.create_topics.v7 import request as create_topics_v7_request
from kio.schema.delete_records import v0 as delete_records_v0
from kio.schema.delete_records import v1 as delete_records_v1
from kio.schema.delete_records import v2 as delete_records_v2
from kio.schema.delete_topics import v1 as delete_topics_v1
from kio.schema.delete_topics import v2 as delete_topics_v2
from kio.schema.delete_topics import v3 as delete_topics_v3
from kio.schema.delete_topics import v4 as delete_topics_v4
from kio.schema.delete_topics import v5 as delete_topics_v5
from kio.schema.delete_topics import v6 as delete_topics_v6
from kio.schema.describe_client_quotas import v0 as describe_client_quotas_v0
from kio.schema.describe_client_quotas import v1 as describe_client_quotas_v1
from kio.schema.describe_client_quotas.v0 import request as describe_client_quotas_v0_request
from kio.schema.describe_client_quotas.v1 import request as describe_client_quotas_v1_request
from kio.schema.describe_cluster import v0 as describe_cluster_v0
from kio.schema.describe_cluster import v1 as describe_cluster_v1
from kio.schema.describe_configs.v1 import request as describe_configs_v1_request
from kio.schema.describe_configs.v2 import request as describe_configs_v2_request
from kio.schema.describe_configs.v3 import request as describe_configs_v3_request
from kio.schema.describe_configs.v4 import request as describe_configs_v4_request
from kio.schema.describe_log_dirs import v1 as describe_log_dirs_v1
from kio.schema.describe_log_dirs import v2 as describe_log_dirs_v2
from kio.schema.describe_log_dirs import v3 as describe_log_dirs_v3
from kio.schema.describe_log_dirs import v4 as describe_log_dirs_v4
from kio.schema.describe_user_scram_credentials import v0 as describe_user_scram_credentials_v0
from kio.schema.elect_leaders import v0 as elect_leaders_v0
from kio.schema.elect_leaders import v1 as elect_leaders_v1
from kio.schema.elect_leaders import v2 as elect_leaders_v2
from kio.schema.incremental_alter_configs.v0 import request as incremental_alter_configs_v0_request
from kio.schema.incremental_alter_configs.v1 import request as incremental_alter_configs_v1_request
from kio.schema.list_partition_reassignments import v0 as list_partition_reassignments_v0
from kio.schema.offset_for_leader_epoch import v2 as offset_for_leader_epoch_v2
from kio.schema.offset_for_leader_epoch import v3 as offset_for_leader_epoch_v3
from kio.schema.offset_for_leader_epoch import v4 as offset_for_leader_epoch_v4
from kio.schema.sasl_authenticate import v0 as sasl_authenticate_v0
from kio.schema.sasl_authenticate import v1 as sasl_authenticate_v1
from kio.schema.sasl_authenticate import v2 as sasl_authenticate_v2
from kio.schema.sasl_handshake import v0 as sasl_handshake_v0
from kio.schema.sasl_handshake import v1 as sasl_handshake_v1

__all__ = [
    "AlterClientQuotasRequest",
    "AlterConfigsResource",
    "AlterPartitionReassignmentsRequest",
    "AlterReplicaLogDirsRequest",
    "AlterUserScramCredentialsRequest",
    "ApiVersionsRequest",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "CreatableTopic",
    "CreatePartitionsRequest",
    "CreatePartitionsTopic",
    "DeleteRecordsRequest",
    "DeleteTopicsRequest",
    "DescribeClientQuotasRequest",
    "DescribeClusterRequest",
    "DescribeConfigsResource",
    "DescribeLogDirsRequest",
    "DescribeUserScramCredentialsRequest",
    "ElectLeadersRequest",
    "IncrementalAlterConfigsResource",
    "ListPartitionReassignmentsRequest",
    "OffsetForLeaderEpochRequest",
    "SaslAuthenticateRequest",
    "SaslHandshakeRequest",
]

ApiVersionsRequest: TypeAlias = (
    api_versions_v0.ApiVersionsRequest
    | api_versions_v1.ApiVersionsRequest
    | api_versions_v2.ApiVersionsRequest
    | api_versions_v3.ApiVersionsRequest
    | api_versions_v4.ApiVersionsRequest
)
"""api_versions v0..v4."""

SaslHandshakeRequest: TypeAlias = sasl_handshake_v0.SaslHandshakeRequest | sasl_handshake_v1.SaslHandshakeRequest
"""sasl_handshake v0..v1."""

SaslAuthenticateRequest: TypeAlias = (
    sasl_authenticate_v0.SaslAuthenticateRequest
    | sasl_authenticate_v1.SaslAuthenticateRequest
    | sasl_authenticate_v2.SaslAuthenticateRequest
)
"""sasl_authenticate v0..v2."""

DescribeClusterRequest: TypeAlias = (
    describe_cluster_v0.DescribeClusterRequest | describe_cluster_v1.DescribeClusterRequest
)
"""describe_cluster v0..v1."""

CreatePartitionsRequest: TypeAlias = (
    create_partitions_v0.CreatePartitionsRequest
    | create_partitions_v1.CreatePartitionsRequest
    | create_partitions_v2.CreatePartitionsRequest
    | create_partitions_v3.CreatePartitionsRequest
)
"""create_partitions v0..v3."""

DeleteTopicsRequest: TypeAlias = (
    delete_topics_v1.DeleteTopicsRequest
    | delete_topics_v2.DeleteTopicsRequest
    | delete_topics_v3.DeleteTopicsRequest
    | delete_topics_v4.DeleteTopicsRequest
    | delete_topics_v5.DeleteTopicsRequest
    | delete_topics_v6.DeleteTopicsRequest
)
"""delete_topics v1..v6."""

DeleteRecordsRequest: TypeAlias = (
    delete_records_v0.DeleteRecordsRequest
    | delete_records_v1.DeleteRecordsRequest
    | delete_records_v2.DeleteRecordsRequest
)
"""delete_records v0..v2."""

ElectLeadersRequest: TypeAlias = (
    elect_leaders_v0.ElectLeadersRequest | elect_leaders_v1.ElectLeadersRequest | elect_leaders_v2.ElectLeadersRequest
)
"""elect_leaders v0..v2."""

AlterPartitionReassignmentsRequest: TypeAlias = alter_partition_reassignments_v0.AlterPartitionReassignmentsRequest
"""alter_partition_reassignments v0."""

ListPartitionReassignmentsRequest: TypeAlias = list_partition_reassignments_v0.ListPartitionReassignmentsRequest
"""list_partition_reassignments v0."""

AlterReplicaLogDirsRequest: TypeAlias = (
    alter_replica_log_dirs_v1.AlterReplicaLogDirsRequest | alter_replica_log_dirs_v2.AlterReplicaLogDirsRequest
)
"""alter_replica_log_dirs v1..v2."""

DescribeLogDirsRequest: TypeAlias = (
    describe_log_dirs_v1.DescribeLogDirsRequest
    | describe_log_dirs_v2.DescribeLogDirsRequest
    | describe_log_dirs_v3.DescribeLogDirsRequest
    | describe_log_dirs_v4.DescribeLogDirsRequest
)
"""describe_log_dirs v1..v4."""

DescribeClientQuotasRequest: TypeAlias = (
    describe_client_quotas_v0.DescribeClientQuotasRequest | describe_client_quotas_v1.DescribeClientQuotasRequest
)
"""describe_client_quotas v0..v1."""

AlterClientQuotasRequest: TypeAlias = (
    alter_client_quotas_v0.AlterClientQuotasRequest | alter_client_quotas_v1.AlterClientQuotasRequest
)
"""alter_client_quotas v0..v1."""

DescribeUserScramCredentialsRequest: TypeAlias = describe_user_scram_credentials_v0.DescribeUserScramCredentialsRequest
"""describe_user_scram_credentials v0."""

AlterUserScramCredentialsRequest: TypeAlias = alter_user_scram_credentials_v0.AlterUserScramCredentialsRequest
"""alter_user_scram_credentials v0."""

OffsetForLeaderEpochRequest: TypeAlias = (
    offset_for_leader_epoch_v2.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v3.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v4.OffsetForLeaderEpochRequest
)
"""offset_for_leader_epoch v2..v4."""

# Nested request entities, for the helpers that take one (of any served version).

CreatableTopic: TypeAlias = (
    create_topics_v2_request.CreatableTopic
    | create_topics_v3_request.CreatableTopic
    | create_topics_v4_request.CreatableTopic
    | create_topics_v5_request.CreatableTopic
    | create_topics_v6_request.CreatableTopic
    | create_topics_v7_request.CreatableTopic
)
"""A topic to create (create_topics v2..v7 ``CreatableTopic``)."""

CreatePartitionsTopic: TypeAlias = (
    create_partitions_v0_request.CreatePartitionsTopic
    | create_partitions_v1_request.CreatePartitionsTopic
    | create_partitions_v2_request.CreatePartitionsTopic
    | create_partitions_v3_request.CreatePartitionsTopic
)
"""A topic to grow (create_partitions v0..v3 ``CreatePartitionsTopic``)."""

DescribeConfigsResource: TypeAlias = (
    describe_configs_v1_request.DescribeConfigsResource
    | describe_configs_v2_request.DescribeConfigsResource
    | describe_configs_v3_request.DescribeConfigsResource
    | describe_configs_v4_request.DescribeConfigsResource
)
"""A resource whose configs to describe (describe_configs v1..v4 ``DescribeConfigsResource``)."""

AlterConfigsResource: TypeAlias = (
    alter_configs_v0_request.AlterConfigsResource
    | alter_configs_v1_request.AlterConfigsResource
    | alter_configs_v2_request.AlterConfigsResource
)
"""A resource whose configs to replace (alter_configs v0..v2 ``AlterConfigsResource``)."""

IncrementalAlterConfigsResource: TypeAlias = (
    incremental_alter_configs_v0_request.AlterConfigsResource
    | incremental_alter_configs_v1_request.AlterConfigsResource
)
"""A resource whose configs to change (incremental_alter_configs v0..v1 ``AlterConfigsResource``)."""

ClientQuotaAlteration: TypeAlias = alter_client_quotas_v0_request.EntryData | alter_client_quotas_v1_request.EntryData
"""An entity's quota changes (alter_client_quotas v0..v1 ``EntryData``)."""

ClientQuotaEntity: TypeAlias = alter_client_quotas_v0_request.EntityData | alter_client_quotas_v1_request.EntityData
"""One (type, name) part of a quota entity (alter_client_quotas v0..v1 ``EntityData``)."""

ClientQuotaFilterComponent: TypeAlias = (
    describe_client_quotas_v0_request.ComponentData | describe_client_quotas_v1_request.ComponentData
)
"""One filter component (describe_client_quotas v0..v1 ``ComponentData``)."""
