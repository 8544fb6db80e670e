"""FindCoordinator (key 10): which broker coordinates a group, a transactional id or a share-partition.

v0..v6. v0 asks for one group (``key``); v1..v3 add ``key_type`` (0 group, 1 transaction) and an
error message; v4+ look up a batch (``coordinator_keys``) and answer one entry per key; v6 adds
key type 2, SHARE (KIP-932): a share-partition's ``"groupId:topicId:partition"``.

Each key type is answered by the broker's coordinator for it (``group_coordinator`` for 0,
``transaction_coordinator`` for 1, ``share_coordinator`` for 2), whose ``find_coordinator(key)``
creates its internal topic (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``) on first use. Groups need DESCRIBE on the group, transactional ids
DESCRIBE on the id, share keys CLUSTER_ACTION on the cluster (as Kafka: a broker's persister asks
them). A SHARE key before v6, a malformed one, or another key type: INVALID_REQUEST. The
coordinator's address is its endpoint on the listener the request arrived on; a coordinator
without that listener is COORDINATOR_NOT_AVAILABLE. On error the node is -1, the host empty and
the port -1, as Kafka answers.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.share.records import parse_share_coordinator_key
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import authorization_error
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, authorize_cluster
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.find_coordinator.v0 import request as find_coordinator_v0
    from kio.schema.find_coordinator.v1 import request as find_coordinator_v1
    from kio.schema.find_coordinator.v4 import request as find_coordinator_v4

    from odradek.server.apis.request_types_groups import FindCoordinatorRequest

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 6

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2
SHARE_MIN_VERSION = 6
_BATCHED = 4
"""v4+ (KIP-699's batching) carry ``coordinator_keys``; older versions one ``key``. The request is
read by version number, so that only the version a client uses is imported (the casts name, for
the type checker, a version with the field read)."""

_RESOURCES = {GROUP_KEY: ResourceType.GROUP, TRANSACTION_KEY: ResourceType.TRANSACTIONAL_ID}


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    if key_type in _RESOURCES and not authorize(ctx, AclOperation.DESCRIBE, _RESOURCES[key_type], key):
        return authorization_error(_RESOURCES[key_type]), -1, "", -1
    if key_type == GROUP_KEY:
        error, node_id = await ctx.services.group_coordinator.find_coordinator(key)
    elif key_type == TRANSACTION_KEY:
        error, node_id = await ctx.services.transaction_coordinator.find_coordinator(key)
    elif key_type == SHARE_KEY and ctx.api_version >= SHARE_MIN_VERSION:
        if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
            return ErrorCode.cluster_authorization_failed, -1, "", -1
        try:
            parse_share_coordinator_key(key)
        except ValueError:
            return ErrorCode.invalid_request, -1, "", -1
        error, node_id = await ctx.services.share_coordinator.find_coordinator(key)
    else:
        return ErrorCode.invalid_request, -1, "", -1
    if error is not ErrorCode.none:
        return error, -1, "", -1
    broker = ctx.services.metadata_cache.brokers_on(ctx.session.listener_name).get(node_id)
    if broker is None:
        return ErrorCode.coordinator_not_available, -1, "", -1
    return ErrorCode.none, node_id, broker.host, broker.port


async def handle(ctx: RequestContext[FindCoordinatorRequest]) -> Any:
    req = ctx.request
    version = ctx.api_version
    key_type = GROUP_KEY if version < 1 else int(cast("find_coordinator_v1.FindCoordinatorRequest", req).key_type)
    throttle = datetime.timedelta(0)
    if version >= _BATCHED:
        coordinators = []
        for key in cast("find_coordinator_v4.FindCoordinatorRequest", req).coordinator_keys:
            error, node_id, host, port = await _lookup(ctx, key_type, key)
            coordinators.append(
                ctx.make(
                    "Coordinator",
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=None if error is ErrorCode.none else error.name,
                )
            )
        return ctx.response(throttle_time=throttle, coordinators=tuple(coordinators))
    error, node_id, host, port = await _lookup(
        ctx, key_type, cast("find_coordinator_v0.FindCoordinatorRequest", req).key
    )
    return ctx.response(
        throttle_time=throttle,
        error_code=error,
        error_message=None if error is ErrorCode.none else error.name,
        node_id=node_id,
        host=host,
        port=port,
    )
