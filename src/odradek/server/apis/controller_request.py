"""Who may send the controller's requests to a broker (LeaderAndIsr, StopReplica, UpdateMetadata).

:func:`refusal` is checked before anything is applied, in Kafka's order: the sender's permission
(CLUSTER_ACTION with an authorizer, else the inter-broker listener:
:func:`odradek.server.auth_helper.authorize_cluster_action`), then the broker epoch (KIP-380):
a request whose ``broker_epoch`` (v2+ LeaderAndIsr, v5+ UpdateMetadata, v1+ StopReplica; -1 when
the version has none or the sender did not know it) is older than this broker's registration was
meant for an earlier life of this broker id and answers STALE_BROKER_EPOCH (Kafka's
``isBrokerEpochStale``). :func:`broker_epoch` reads that field by version, for ControlledShutdown
(v2+) too. Event loop only.
"""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import authorize_cluster_action
from odradek.server.request import RequestContext

__all__ = ["broker_epoch", "refusal"]

BROKER_EPOCH_SINCE = {
    ApiKey.LEADER_AND_ISR: 2,
    ApiKey.STOP_REPLICA: 1,
    ApiKey.UPDATE_METADATA: 5,
    ApiKey.CONTROLLED_SHUTDOWN: 2,
}
"""The first version of each inter-broker request that carries ``broker_epoch`` (KIP-380)."""


def broker_epoch(ctx: RequestContext) -> int:
    """The request's ``broker_epoch``; -1 for a version without one. (These requests' classes are
    built at run time by :mod:`odradek.protocol.inter_broker_messages`, so the body is untyped and
    the field is chosen by version.)"""
    if ctx.api_version < BROKER_EPOCH_SINCE[ApiKey(ctx.header.api_key)]:
        return -1
    return int(ctx.request.broker_epoch)


def refusal(ctx: RequestContext) -> ErrorCode | None:
    """CLUSTER_AUTHORIZATION_FAILED, STALE_BROKER_EPOCH, or None when the request may be applied."""
    if not authorize_cluster_action(ctx):
        return ErrorCode.cluster_authorization_failed
    epoch = broker_epoch(ctx)
    if epoch != -1 and epoch < ctx.services.broker_epoch:
        return ErrorCode.stale_broker_epoch
    return None
