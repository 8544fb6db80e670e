"""ElectLeaders (key 43): preferred or unclean leader election on demand (KIP-183, KIP-460).

v0..v2 (v1 adds ``election_type``: 0 preferred, 1 unclean; v0 is always preferred). Answered by
the controller only: other brokers answer NOT_CONTROLLER at the top level, so the client looks
the controller up again (Kafka's AdminClient sends it there). ``topic_partitions`` null means
every partition. Per partition: NONE (the leader moved), ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION; see
:meth:`odradek.controller.operations.ControllerOperations._on_elect_leaders`.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, authorize_cluster
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from kio.schema.elect_leaders.v1 import request as elect_leaders_v1

    from odradek.server.apis.request_types_admin import ElectLeadersRequest

API_KEY = ApiKey.ELECT_LEADERS
MIN_VERSION = 0
MAX_VERSION = 2
UNCLEAN = 1


async def handle(ctx: RequestContext[ElectLeadersRequest]) -> Any:
    req = ctx.request
    controller = ctx.services.controller
    partitions = (
        None
        if req.topic_partitions is None
        else {TopicPartition(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions}
    )
    results = None
    top = ErrorCode.none
    if not authorize_cluster(ctx, AclOperation.ALTER):
        top = ErrorCode.cluster_authorization_failed
        results = dict.fromkeys(partitions or (), top)
    elif controller is not None and controller.active:
        # v1+ carry election_type (read by version number: only the version a client uses is imported)
        unclean = ctx.api_version >= 1 and cast("elect_leaders_v1.ElectLeadersRequest", req).election_type == UNCLEAN
        results = await controller.elect_leaders(partitions, unclean=unclean)
    if results is None:
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=ErrorCode.not_controller, replica_election_results=()
        )
    by_topic: dict[str, list[Any]] = {}
    for tp, error in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            ctx.make(
                "PartitionResult",
                partition_id=tp.partition,
                error_code=error,
                error_message=None if error == ErrorCode.none else error.name.upper(),
            )
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=top,
        replica_election_results=tuple(
            ctx.make("ReplicaElectionResult", topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
