"""DescribeLogDirs (key 35): this broker's log directories and the partitions in each.

v1..v4 (v0 left with Kafka 4.0, KIP-896). Answered by the broker asked, for its own
``log.dirs``, as Kafka: per directory its path, ``total_bytes`` and ``usable_bytes`` (v4, from
``statvfs``; -1 when the directory cannot be read) and, per partition, ``partition_size`` (the
bytes of its segment files), ``offset_lag`` 0 and ``is_future_key`` false (a replica moving between directories with
AlterReplicaLogDirs is listed where it is until the move completes: appends pause meanwhile, so
there is no future replica to report). ``topics`` null describes every
partition; otherwise only the named ones. A directory that cannot be read answers
KAFKA_STORAGE_ERROR with no partitions, as does one that went offline after an I/O error. Runs
on the broker's event loop.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, authorize_cluster
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import DescribeLogDirsRequest

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
MIN_VERSION = 1
MAX_VERSION = 4


def _space(directory: Path) -> tuple[int, int] | None:
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: RequestContext[DescribeLogDirsRequest]) -> Any:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=ErrorCode.cluster_authorization_failed, results=()
        )
    wanted = (
        None
        if ctx.request.topics is None
        else {TopicPartition(t.topic, int(p)) for t in ctx.request.topics for p in t.partitions}
    )
    log_manager = ctx.services.replica_manager.log_manager
    by_dir: dict[Path, dict[str, list[Any]]] = {d: {} for d in log_manager.log_dirs}
    for log_ in sorted(log_manager.all_logs(), key=lambda entry: entry.topic_partition):
        tp = log_.topic_partition
        if wanted is not None and tp not in wanted:
            continue
        by_dir.setdefault(log_.dir.parent, {}).setdefault(tp.topic, []).append(
            ctx.make(
                "DescribeLogDirsPartition",
                partition_index=tp.partition,
                partition_size=log_.size_in_bytes,
                offset_lag=0,
                is_future_key=False,
            )
        )
    results = []
    for directory, topics in by_dir.items():
        space = _space(directory) if directory not in log_manager.offline_dirs else None
        results.append(
            ctx.make(
                "DescribeLogDirsResult",
                error_code=ErrorCode.none if space is not None else ErrorCode.kafka_storage_error,
                log_dir=str(directory),
                topics=tuple(
                    ctx.make("DescribeLogDirsTopic", name=name, partitions=tuple(parts))
                    for name, parts in topics.items()
                )
                if space is not None
                else (),
                total_bytes=space[0] if space is not None else -1,
                usable_bytes=space[1] if space is not None else -1,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, results=tuple(results))
