"""The request bodies the handlers of :mod:`odradek.server.apis` serve, as unions over the
generated request classes of each API's served versions (``MIN_VERSION``..``MAX_VERSION``).

A handler declares ``ctx: RequestContext[ProduceRequest]`` so mypy checks each field it reads
against every version: a field some versions lack is read behind a version check. Handlers import
this module for annotations only (under ``TYPE_CHECKING``).
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.add_partitions_to_txn import v0 as add_partitions_to_txn_v0
from kio.schema.add_partitions_to_txn import v1 as add_partitions_to_txn_v1
from kio.schema.add_partitions_to_txn import v2 as add_partitions_to_txn_v2
from kio.schema.add_partitions_to_txn import v3 as add_partitions_to_txn_v3
from kio.schema.add_partitions_to_txn import v4 as add_partitions_to_txn_v4
from kio.schema.add_partitions_to_txn import v5 as add_partitions_to_txn_v5
from kio.schema.alter_configs import v0 as alter_configs_v0
from kio.schema.alter_configs import v1 as alter_configs_v1
from kio.schema.alter_configs import v2 as alter_configs_v2
from kio.schema.create_acls import v1 as create_acls_v1
from kio.schema.create_acls import v2 as create_acls_v2
from kio.schema.create_acls import v3 as create_acls_v3
from kio.schema.create_topics import (
    v2 as create_topics_v2,
)
from kio.schema.create_topics import (
    v3 as create_topics_v3,
)
from kio.schema.create_topics import (
    v4 as create_topics_v4,
)
from kio.schema.create_topics import (
    v5 as create_topics_v5,
)
from kio.schema.create_topics import (
    v6 as create_topics_v6,
)
from kio.schema.create_topics import (
    v7 as create_topics_v7,
)
from kio.schema.delete_acls import v1 as delete_acls_v1
from kio.schema.delete_acls import v2 as delete_acls_v2
from kio.schema.delete_acls import v3 as delete_acls_v3
from kio.schema.describe_acls import v1 as describe_acls_v1
from kio.schema.describe_acls import v2 as describe_acls_v2
from kio.schema.describe_acls import v3 as describe_acls_v3
from kio.schema.describe_configs import (
    v1 as describe_configs_v1,
)
from kio.schema.describe_configs import (
    v2 as describe_configs_v2,
)
from kio.schema.describe_configs import (
    v3 as describe_configs_v3,
)
from kio.schema.describe_configs import (
    v4 as describe_configs_v4,
)
from kio.schema.describe_groups import v0 as describe_groups_v0
from kio.schema.describe_groups import v1 as describe_groups_v1
from kio.schema.describe_groups import v2 as describe_groups_v2
from kio.schema.describe_groups import v3 as describe_groups_v3
from kio.schema.describe_groups import v4 as describe_groups_v4
from kio.schema.describe_groups import v5 as describe_groups_v5
from kio.schema.fetch import (
    v4 as fetch_v4,
)
from kio.schema.fetch import (
    v5 as fetch_v5,
)
from kio.schema.fetch import (
    v6 as fetch_v6,
)
from kio.schema.fetch import (
    v7 as fetch_v7,
)
from kio.schema.fetch import (
    v8 as fetch_v8,
)
from kio.schema.fetch import (
    v9 as fetch_v9,
)
from kio.schema.fetch import (
    v10 as fetch_v10,
)
from kio.schema.fetch import (
    v11 as fetch_v11,
)
from kio.schema.fetch import (
    v12 as fetch_v12,
)
from kio.schema.fetch import (
    v13 as fetch_v13,
)
from kio.schema.fetch import (
    v14 as fetch_v14,
)
from kio.schema.fetch import (
    v15 as fetch_v15,
)
from kio.schema.fetch import (
    v16 as fetch_v16,
)
from kio.schema.fetch import (
    v17 as fetch_v17,
)
from kio.schema.heartbeat import (
    v0 as heartbeat_v0,
)
from kio.schema.heartbeat import (
    v1 as heartbeat_v1,
)
from kio.schema.heartbeat import (
    v2 as heartbeat_v2,
)
from kio.schema.heartbeat import (
    v3 as heartbeat_v3,
)
from kio.schema.heartbeat import (
    v4 as heartbeat_v4,
)
from kio.schema.incremental_alter_configs import v0 as incremental_alter_configs_v0
from kio.schema.incremental_alter_configs import v1 as incremental_alter_configs_v1
from kio.schema.join_group import (
    v0 as join_group_v0,
)
from kio.schema.join_group import (
    v1 as join_group_v1,
)
from kio.schema.join_group import (
    v2 as join_group_v2,
)
from kio.schema.join_group import (
    v3 as join_group_v3,
)
from kio.schema.join_group import (
    v4 as join_group_v4,
)
from kio.schema.join_group import (
    v5 as join_group_v5,
)
from kio.schema.join_group import (
    v6 as join_group_v6,
)
from kio.schema.join_group import (
    v7 as join_group_v7,
)
from kio.schema.join_group import (
    v8 as join_group_v8,
)
from kio.schema.join_group import (
    v9 as join_group_v9,
)
from kio.schema.list_offsets import (
    v1 as list_offsets_v1,
)
from kio.schema.list_offsets import (
    v2 as list_offsets_v2,
)
from kio.schema.list_offsets import (
    v3 as list_offsets_v3,
)
from kio.schema.list_offsets import (
    v4 as list_offsets_v4,
)
from kio.schema.list_offsets import (
    v5 as list_offsets_v5,
)
from kio.schema.list_offsets import (
    v6 as list_offsets_v6,
)
from kio.schema.list_offsets import (
    v7 as list_offsets_v7,
)
from kio.schema.list_offsets import (
    v8 as list_offsets_v8,
)
from kio.schema.list_offsets import (
    v9 as list_offsets_v9,
)
from kio.schema.metadata import (
    v0 as metadata_v0,
)
from kio.schema.metadata import (
    v1 as metadata_v1,
)
from kio.schema.metadata import (
    v2 as metadata_v2,
)
from kio.schema.metadata import (
    v3 as metadata_v3,
)
from kio.schema.metadata import (
    v4 as metadata_v4,
)
from kio.schema.metadata import (
    v5 as metadata_v5,
)
from kio.schema.metadata import (
    v6 as metadata_v6,
)
from kio.schema.metadata import (
    v7 as metadata_v7,
)
from kio.schema.metadata import (
    v8 as metadata_v8,
)
from kio.schema.metadata import (
    v9 as metadata_v9,
)
from kio.schema.metadata import (
    v10 as metadata_v10,
)
from kio.schema.metadata import (
    v11 as metadata_v11,
)
from kio.schema.metadata import (
    v12 as metadata_v12,
)
from kio.schema.offset_commit import (
    v2 as offset_commit_v2,
)
from kio.schema.offset_commit import (
    v3 as offset_commit_v3,
)
from kio.schema.offset_commit import (
    v4 as offset_commit_v4,
)
from kio.schema.offset_commit import (
    v5 as offset_commit_v5,
)
from kio.schema.offset_commit import (
    v6 as offset_commit_v6,
)
from kio.schema.offset_commit import (
    v7 as offset_commit_v7,
)
from kio.schema.offset_commit import (
    v8 as offset_commit_v8,
)
from kio.schema.offset_commit import (
    v9 as offset_commit_v9,
)
from kio.schema.offset_fetch import (
    v1 as offset_fetch_v1,
)
from kio.schema.offset_fetch import (
    v2 as offset_fetch_v2,
)
from kio.schema.offset_fetch import (
    v3 as offset_fetch_v3,
)
from kio.schema.offset_fetch import (
    v4 as offset_fetch_v4,
)
from kio.schema.offset_fetch import (
    v5 as offset_fetch_v5,
)
from kio.schema.offset_fetch import (
    v6 as offset_fetch_v6,
)
from kio.schema.offset_fetch import (
    v7 as offset_fetch_v7,
)
from kio.schema.offset_fetch import (
    v8 as offset_fetch_v8,
)
from kio.schema.offset_fetch import (
    v9 as offset_fetch_v9,
)
from kio.schema.produce import (
    v3 as produce_v3,
)
from kio.schema.produce import (
    v4 as produce_v4,
)
from kio.schema.produce import (
    v5 as produce_v5,
)
from kio.schema.produce import (
    v6 as produce_v6,
)
from kio.schema.produce import (
    v7 as produce_v7,
)
from kio.schema.produce import (
    v8 as produce_v8,
)
from kio.schema.produce import (
    v9 as produce_v9,
)
from kio.schema.produce import (
    v10 as produce_v10,
)
from kio.schema.produce import (
    v11 as produce_v11,
)
from kio.schema.sync_group import (
    v0 as sync_group_v0,
)
from kio.schema.sync_group import (
    v1 as sync_group_v1,
)
from kio.schema.sync_group import (
    v2 as sync_group_v2,
)
from kio.schema.sync_group import (
    v3 as sync_group_v3,
)
from kio.schema.sync_group import (
    v4 as sync_group_v4,
)
from kio.schema.sync_group import (
    v5 as sync_group_v5,
)
from kio.schema.write_txn_markers import v1 as write_txn_markers_v1

from odradek.protocol import legacy_messages

__all__ = [
    "AddPartitionsToTxnRequest",
    "AlterConfigsRequest",
    "CreateAclsRequest",
    "CreateTopicsRequest",
    "DeleteAclsRequest",
    "DescribeAclsRequest",
    "DescribeConfigsRequest",
    "DescribeGroupsRequest",
    "FetchRequest",
    "HeartbeatRequest",
    "IncrementalAlterConfigsRequest",
    "JoinGroupRequest",
    "ListOffsetsRequest",
    "MetadataRequest",
    "OffsetCommitRequest",
    "OffsetFetchRequest",
    "ProduceRequest",
    "SyncGroupRequest",
    "WriteTxnMarkersRequest",
]

ProduceRequest: TypeAlias = (
    produce_v3.ProduceRequest
    | produce_v4.ProduceRequest
    | produce_v5.ProduceRequest
    | produce_v6.ProduceRequest
    | produce_v7.ProduceRequest
    | produce_v8.ProduceRequest
    | produce_v9.ProduceRequest
    | produce_v10.ProduceRequest
    | produce_v11.ProduceRequest
)
"""produce v3..v11."""

FetchRequest: TypeAlias = (
    fetch_v4.FetchRequest
    | fetch_v5.FetchRequest
    | fetch_v6.FetchRequest
    | fetch_v7.FetchRequest
    | fetch_v8.FetchRequest
    | fetch_v9.FetchRequest
    | fetch_v10.FetchRequest
    | fetch_v11.FetchRequest
    | fetch_v12.FetchRequest
    | fetch_v13.FetchRequest
    | fetch_v14.FetchRequest
    | fetch_v15.FetchRequest
    | fetch_v16.FetchRequest
    | fetch_v17.FetchRequest
)
"""fetch v4..v17."""

MetadataRequest: TypeAlias = (
    metadata_v0.MetadataRequest
    | metadata_v1.MetadataRequest
    | metadata_v2.MetadataRequest
    | metadata_v3.MetadataRequest
    | metadata_v4.MetadataRequest
    | metadata_v5.MetadataRequest
    | metadata_v6.MetadataRequest
    | metadata_v7.MetadataRequest
    | metadata_v8.MetadataRequest
    | metadata_v9.MetadataRequest
    | metadata_v10.MetadataRequest
    | metadata_v11.MetadataRequest
    | metadata_v12.MetadataRequest
)
"""metadata v0..v12."""

ListOffsetsRequest: TypeAlias = (
    legacy_messages.ListOffsetsRequestV0
    | list_offsets_v1.ListOffsetsRequest
    | list_offsets_v2.ListOffsetsRequest
    | list_offsets_v3.ListOffsetsRequest
    | list_offsets_v4.ListOffsetsRequest
    | list_offsets_v5.ListOffsetsRequest
    | list_offsets_v6.ListOffsetsRequest
    | list_offsets_v7.ListOffsetsRequest
    | list_offsets_v8.ListOffsetsRequest
    | list_offsets_v9.ListOffsetsRequest
)
"""list_offsets v0..v9."""

OffsetCommitRequest: TypeAlias = (
    legacy_messages.OffsetCommitRequestV0
    | legacy_messages.OffsetCommitRequestV1
    | offset_commit_v2.OffsetCommitRequest
    | offset_commit_v3.OffsetCommitRequest
    | offset_commit_v4.OffsetCommitRequest
    | offset_commit_v5.OffsetCommitRequest
    | offset_commit_v6.OffsetCommitRequest
    | offset_commit_v7.OffsetCommitRequest
    | offset_commit_v8.OffsetCommitRequest
    | offset_commit_v9.OffsetCommitRequest
)
"""offset_commit v0..v9."""

OffsetFetchRequest: TypeAlias = (
    legacy_messages.OffsetFetchRequestV0
    | offset_fetch_v1.OffsetFetchRequest
    | offset_fetch_v2.OffsetFetchRequest
    | offset_fetch_v3.OffsetFetchRequest
    | offset_fetch_v4.OffsetFetchRequest
    | offset_fetch_v5.OffsetFetchRequest
    | offset_fetch_v6.OffsetFetchRequest
    | offset_fetch_v7.OffsetFetchRequest
    | offset_fetch_v8.OffsetFetchRequest
    | offset_fetch_v9.OffsetFetchRequest
)
"""offset_fetch v0..v9."""

JoinGroupRequest: TypeAlias = (
    join_group_v0.JoinGroupRequest
    | join_group_v1.JoinGroupRequest
    | join_group_v2.JoinGroupRequest
    | join_group_v3.JoinGroupRequest
    | join_group_v4.JoinGroupRequest
    | join_group_v5.JoinGroupRequest
    | join_group_v6.JoinGroupRequest
    | join_group_v7.JoinGroupRequest
    | join_group_v8.JoinGroupRequest
    | join_group_v9.JoinGroupRequest
)
"""join_group v0..v9."""

SyncGroupRequest: TypeAlias = (
    sync_group_v0.SyncGroupRequest
    | sync_group_v1.SyncGroupRequest
    | sync_group_v2.SyncGroupRequest
    | sync_group_v3.SyncGroupRequest
    | sync_group_v4.SyncGroupRequest
    | sync_group_v5.SyncGroupRequest
)
"""sync_group v0..v5."""

HeartbeatRequest: TypeAlias = (
    heartbeat_v0.HeartbeatRequest
    | heartbeat_v1.HeartbeatRequest
    | heartbeat_v2.HeartbeatRequest
    | heartbeat_v3.HeartbeatRequest
    | heartbeat_v4.HeartbeatRequest
)
"""heartbeat v0..v4."""

CreateTopicsRequest: TypeAlias = (
    create_topics_v2.CreateTopicsRequest
    | create_topics_v3.CreateTopicsRequest
    | create_topics_v4.CreateTopicsRequest
    | create_topics_v5.CreateTopicsRequest
    | create_topics_v6.CreateTopicsRequest
    | create_topics_v7.CreateTopicsRequest
)
"""create_topics v2..v7."""

CreateAclsRequest: TypeAlias = (
    create_acls_v1.CreateAclsRequest | create_acls_v2.CreateAclsRequest | create_acls_v3.CreateAclsRequest
)
"""create_acls v1..v3."""

DescribeAclsRequest: TypeAlias = (
    describe_acls_v1.DescribeAclsRequest | describe_acls_v2.DescribeAclsRequest | describe_acls_v3.DescribeAclsRequest
)
"""describe_acls v1..v3."""

DeleteAclsRequest: TypeAlias = (
    delete_acls_v1.DeleteAclsRequest | delete_acls_v2.DeleteAclsRequest | delete_acls_v3.DeleteAclsRequest
)
"""delete_acls v1..v3."""

DescribeConfigsRequest: TypeAlias = (
    describe_configs_v1.DescribeConfigsRequest
    | describe_configs_v2.DescribeConfigsRequest
    | describe_configs_v3.DescribeConfigsRequest
    | describe_configs_v4.DescribeConfigsRequest
)
"""describe_configs v1..v4."""

AlterConfigsRequest: TypeAlias = (
    alter_configs_v0.AlterConfigsRequest | alter_configs_v1.AlterConfigsRequest | alter_configs_v2.AlterConfigsRequest
)
"""alter_configs v0..v2."""

IncrementalAlterConfigsRequest: TypeAlias = (
    incremental_alter_configs_v0.IncrementalAlterConfigsRequest
    | incremental_alter_configs_v1.IncrementalAlterConfigsRequest
)
"""incremental_alter_configs v0..v1."""

DescribeGroupsRequest: TypeAlias = (
    describe_groups_v0.DescribeGroupsRequest
    | describe_groups_v1.DescribeGroupsRequest
    | describe_groups_v2.DescribeGroupsRequest
    | describe_groups_v3.DescribeGroupsRequest
    | describe_groups_v4.DescribeGroupsRequest
    | describe_groups_v5.DescribeGroupsRequest
)
"""describe_groups v0..v5."""

AddPartitionsToTxnRequest: TypeAlias = (
    add_partitions_to_txn_v0.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v1.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v2.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v3.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v4.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v5.AddPartitionsToTxnRequest
)
"""add_partitions_to_txn v0..v5."""

WriteTxnMarkersRequest: TypeAlias = write_txn_markers_v1.WriteTxnMarkersRequest
"""write_txn_markers v1."""
