"""Who may send the controller's requests to a broker (LeaderAndIsr, StopReplica, UpdateMetadata).

:func:`refusal` is checked before anything is applied, in Kafka's order: the sender's permission
(CLUSTER_ACTION with an authorizer, else the inter-broker listener:
:func:`odradek.server.auth_helper.authorize_cluster_action`), then the broker epoch (KIP-380):
a request whose ``broker_epoch`` (v2+ LeaderAndIsr, v5+ UpdateMetadata, v1+ StopReplica; -1 when
the version has none or the sender did not know it) is older than this broker's registration was
meant for an earlier life of this broker id and answers STALE_BROKER_EPOCH (Kafka's
``isBrokerEpochStale``). Event loop only.
"""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.server.auth_helper import authorize_cluster_action
from odradek.server.request import RequestContext

__all__ = ["refusal"]


def refusal(ctx: RequestContext) -> ErrorCode | None:
    """CLUSTER_AUTHORIZATION_FAILED, STALE_BROKER_EPOCH, or None when the request may be applied."""
    if not authorize_cluster_action(ctx):
        return ErrorCode.cluster_authorization_failed
    epoch = int(getattr(ctx.request, "broker_epoch", -1))
    if epoch != -1 and epoch < ctx.services.broker_epoch:
        return ErrorCode.stale_broker_epoch
    return None
