"""Kafka's ``KafkaServer.controlledShutdown``: before a broker stops, it asks the controller (over
the inter-broker listener) to move every leadership it holds elsewhere, so clients switch at once
rather than after the broker's ZooKeeper session ends.

:func:`request_controlled_shutdown` sends ControlledShutdown (key 7) to the controller the
broker's metadata names, and retries ``controlled.shutdown.max.retries`` times,
``controlled.shutdown.retry.backoff.ms`` apart, while partitions remain led by this broker, the
controller is unknown or cannot be reached (each failed attempt is one warning naming why). The
caller (:meth:`odradek.server.broker.Broker.controlled_shutdown`) decides whether to ask at all
and stops its fetchers first. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.client.connection import KafkaConnection
from odradek.client.security import ClientSecurity
from odradek.controller.messages import controlled_shutdown
from odradek.errors import ErrorCode
from odradek.server.config import KafkaConfig

log = logging.getLogger("odradek.server.broker")


async def request_controlled_shutdown(
    cfg: KafkaConfig,
    broker_id: int,
    broker_epoch: int,
    controller_id: Callable[[], int],
    endpoint_for: Callable[[int], tuple[str, int] | None],
    security: ClientSecurity,
) -> bool:
    """True once the controller answers that no partition is led by ``broker_id`` any more;
    False after the last retry. ``controller_id`` and ``endpoint_for`` read the broker's
    metadata at each attempt (a controller failover meanwhile is followed)."""
    retries = cfg.get_int("controlled.shutdown.max.retries")
    backoff_s = cfg.get_int("controlled.shutdown.retry.backoff.ms") / 1000
    for attempt in range(1, retries + 1):
        controller = controller_id()
        endpoint = endpoint_for(controller) if controller >= 0 else None
        reason = f"controller {controller} unknown"
        if endpoint is not None:
            try:
                async with KafkaConnection(
                    endpoint[0],
                    endpoint[1],
                    client_id=f"broker-{broker_id}-controlled-shutdown",
                    request_timeout_ms=cfg.get_int("controller.socket.timeout.ms"),
                    security=security,
                ) as conn:
                    version = conn.version_for(controlled_shutdown.API_KEY, 1)
                    response = await conn.send(controlled_shutdown.encode(broker_id, version, broker_epoch))
                error, still_led = controlled_shutdown.decode_response(response)
                remaining = len(still_led)
                if error == ErrorCode.none and remaining == 0:
                    log.info("broker %d: controlled shutdown succeeded", broker_id)
                    return True
                reason = f"{error.name}, {remaining} partitions remain"
            except Exception as exc:
                reason = str(exc)
        log.warning("broker %d: controlled shutdown attempt %d of %d failed: %s", broker_id, attempt, retries, reason)
        if attempt < retries:
            await asyncio.sleep(backoff_s)
    return False
