"""AlterReplicaLogDirs (key 34): move replicas between this broker's log dirs.

v1..v2 (v0 left with Kafka 4.0, KIP-896). Per partition: NONE once the move is started (or when
the replica is already in that directory), LOG_DIR_NOT_FOUND for a path that is not one of
``log.dirs``, KAFKA_STORAGE_ERROR when the directory or the replica is offline,
REPLICA_NOT_AVAILABLE when this broker hosts no replica yet (the directory is then used when it
is created). The move runs in the background: see :mod:`odradek.replication.alter_log_dirs`;
DescribeLogDirs shows the replica in its new directory once it is done. Runs on the broker's event
loop.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, authorize_cluster
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import AlterReplicaLogDirsRequest

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS
MIN_VERSION = 1
MAX_VERSION = 2

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext[AlterReplicaLogDirsRequest]) -> Any:
    mover = ctx.services.replica_manager.alter_log_dirs
    by_topic: dict[str, list[Any]] = {}
    allowed = authorize_cluster(ctx, AclOperation.ALTER)
    for directory in ctx.request.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                tp = TopicPartition(topic.name, int(index))
                try:
                    error = ErrorCode.cluster_authorization_failed
                    if allowed:
                        mover.alter(tp, directory.path)
                        error = ErrorCode.none
                except KafkaError as exc:
                    error = exc.error_code
                except Exception:
                    log.exception("AlterReplicaLogDirs of %s-%d failed", tp.topic, tp.partition)
                    error = ErrorCode.unknown_server_error
                by_topic.setdefault(topic.name, []).append(
                    ctx.make("AlterReplicaLogDirPartitionResult", partition_index=index, error_code=error)
                )
    results = tuple(
        ctx.make("AlterReplicaLogDirTopicResult", topic_name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return ctx.response(throttle_time=datetime.timedelta(0), results=results)
