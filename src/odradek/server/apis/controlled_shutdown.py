"""ControlledShutdown (key 7): a broker asks the controller to move its leaderships away first.

v0..v3 (Kafka 3.9; v0 uses request header v0, without client id). Only the active controller
answers; any other broker answers NOT_CONTROLLER so the sender looks the controller up again.
The request goes through the controller's event queue (``KafkaController.controlled_shutdown``):
BROKER_NOT_AVAILABLE for a broker that is not registered, else NONE with the partitions the
broker still leads (those with no other live in-sync replica); the broker retries while any
remain. ``broker_epoch`` (v2+) older than the broker's registration answers STALE_BROKER_EPOCH
(KIP-380). Needs CLUSTER_ACTION (with an authorizer) or the inter-broker listener.
"""

from __future__ import annotations

from typing import Any

from odradek.controller.messages import controlled_shutdown as message
from odradek.errors import ErrorCode
from odradek.server.apis.controller_request import broker_epoch
from odradek.server.auth_helper import authorize_cluster_action
from odradek.server.request import RequestContext

API_KEY = message.API_KEY
MIN_VERSION = message.MIN_VERSION
MAX_VERSION = message.MAX_VERSION


async def handle(ctx: RequestContext) -> Any:
    if not authorize_cluster_action(ctx):
        return message.encode_response(ctx.api_version, ErrorCode.cluster_authorization_failed, ())
    controller = ctx.services.controller
    if controller is None or not controller.active:
        return message.encode_response(ctx.api_version, ErrorCode.not_controller, ())
    error, remaining = await controller.controlled_shutdown(message.decode(ctx.request), broker_epoch(ctx))
    return message.encode_response(ctx.api_version, error, remaining)
