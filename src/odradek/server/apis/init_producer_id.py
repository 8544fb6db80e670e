"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

v0..v5 (v5, KIP-890, reads as v4). Without a transactional id the broker hands out a fresh producer
id (epoch 0) from the block it reserved in the metadata store; clients such as kafka-python 3
enable idempotence by default and ask for one. With a transactional id the transaction coordinator
answers (:mod:`odradek.coordinator.transaction`): the id's producer id with a new epoch, fencing
the previous producer; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.init_producer_id.v3 import request as init_producer_id_v3

    from odradek.server.apis.request_types_txn import InitProducerIdRequest

API_KEY = ApiKey.INIT_PRODUCER_ID
MIN_VERSION = 0
MAX_VERSION = 5

_PRODUCER_FIELDS = 3
"""v3+ carry ``producer_id`` and ``producer_epoch`` (KIP-360). The request is read by version
number, so that only the version a client uses is imported."""


def _refused(ctx: RequestContext, error: ErrorCode) -> Any:
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=error, producer_id=-1, producer_epoch=-1)


async def handle(ctx: RequestContext[InitProducerIdRequest]) -> Any:
    req = ctx.request
    if req.transactional_id is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    ):
        return _refused(ctx, ErrorCode.transactional_id_authorization_failed)
    if req.transactional_id is None and not (
        authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
        or authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _refused(ctx, ErrorCode.cluster_authorization_failed)
    if req.transactional_id is not None:
        timeout_ms = int(req.transaction_timeout.total_seconds() * 1000)
        if ctx.api_version < _PRODUCER_FIELDS:
            producer_id, producer_epoch = -1, -1
        else:
            with_producer = cast("init_producer_id_v3.InitProducerIdRequest", req)
            producer_id, producer_epoch = int(with_producer.producer_id), int(with_producer.producer_epoch)
        error, pid, epoch = await ctx.services.transaction_coordinator.init_producer_id(
            req.transactional_id, timeout_ms, producer_id, producer_epoch
        )
        if error == ErrorCode.producer_fenced and ctx.api_version < 4:
            error = ErrorCode.invalid_producer_epoch
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=error, producer_id=pid, producer_epoch=epoch
        )
    pid = await ctx.services.producer_ids.generate_producer_id()
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, producer_id=pid, producer_epoch=0
    )
