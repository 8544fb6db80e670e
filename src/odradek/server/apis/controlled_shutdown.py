"""ControlledShutdown (key 7): a broker asks the controller to move its leaderships away first.

v0..v3 (Kafka 3.9; v0 uses request header v0, without client id). Only the active controller
answers; any other broker answers NOT_CONTROLLER so the sender looks the controller up again.
The request goes through the controller's event queue (``KafkaController.controlled_shutdown``):
BROKER_NOT_AVAILABLE for a broker that is not registered, else NONE with the partitions the
broker still leads (those with no other live in-sync replica); the broker retries while any
remain. ``broker_epoch`` (v2+) is not checked.
"""

from __future__ import annotations

from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.request import RequestContext

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext) -> Any:
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return ctx.response(error_code=ErrorCode.not_controller, remaining_partitions=())
    error, remaining = await controller.controlled_shutdown(int(ctx.request.broker_id))
    return ctx.response(
        error_code=error,
        remaining_partitions=tuple(
            ctx.make("RemainingPartition", topic_name=tp.topic, partition_index=tp.partition)
            for tp in sorted(remaining, key=lambda tp: (tp.topic, tp.partition))
        ),
    )
