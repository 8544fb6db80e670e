"""DescribeCluster (key 60): cluster id, controller id and live brokers.

v0..v1 (Kafka 3.9's range; v2's ``is_fenced`` is Kafka 4.0's), answered from this broker's metadata
cache. ``brokers`` lists every live broker with host, port and rack, the host and port of the
listener the request arrived on (a broker without that listener is left out). ``endpoint_type`` (v1+) 1
describes brokers; 2 (controllers, a KRaft notion) is answered with UNSUPPORTED_ENDPOINT_TYPE and
no brokers. ``controller_id`` is -1 while no controller is known. Cluster authorized operations are
not computed (the "omitted" value). Runs on the broker's event loop."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import CLUSTER_NAME, ResourceType, operations_field
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v1 import request as describe_cluster_v1

    from odradek.server.apis.request_types_admin import DescribeClusterRequest

API_KEY = ApiKey.DESCRIBE_CLUSTER
MIN_VERSION = 0
MAX_VERSION = 1

ENDPOINT_BROKERS = 1


async def handle(ctx: RequestContext[DescribeClusterRequest]) -> Any:
    cache = ctx.services.metadata_cache
    req = ctx.request
    endpoint_type = (  # v1+ (read by version number: only the version a client uses is imported)
        ENDPOINT_BROKERS
        if ctx.api_version < 1
        else cast("describe_cluster_v1.DescribeClusterRequest", req).endpoint_type
    )
    error, message = ErrorCode.none, None
    brokers: tuple[Any, ...] = ()
    if endpoint_type != ENDPOINT_BROKERS:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {endpoint_type}: odradek brokers only describe brokers (1)"
    else:
        brokers = tuple(
            ctx.make("DescribeClusterBroker", broker_id=b.id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
            for b in sorted(cache.brokers_on(ctx.session.listener_name).values(), key=lambda b: b.id)
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        endpoint_type=endpoint_type,
        cluster_id=ctx.services.cluster_id,
        controller_id=cache.controller_id,
        brokers=brokers,
        cluster_authorized_operations=operations_field(
            ctx, bool(req.include_cluster_authorized_operations), ResourceType.CLUSTER, CLUSTER_NAME
        ),
    )
