"""WriteShareGroupState (key 85): a share-partition's leader writes its start offset and the
delivery states it changed (KIP-932, inter-broker).

v0..v1 (v1 adds the delivery-complete count, KIP-1226). Each partition: the share coordinator's
``write_state``, answered once the record is durable. A share-partition never initialized is
INVALID_REQUEST, a leader epoch below the recorded one FENCED_LEADER_EPOCH, a state epoch below
the kept one FENCED_STATE_EPOCH, a delivery state Kafka does not define (e.g. 3) INVALID_REQUEST.
Authorization, ownership and the other errors as in :mod:`.share_state_support`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_state_support import answer_partitions
from odradek.server.request import RequestContext
from odradek.share.state import DeliveryState, SharePartitionKey, StateBatch

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import WriteShareGroupStateRequest

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 1


async def _write(coordinator: ShareCoordinator, key: SharePartitionKey, data: Any) -> dict[str, Any]:
    batches = [
        StateBatch(int(b.first_offset), int(b.last_offset), DeliveryState(b.delivery_state), int(b.delivery_count))
        for b in data.state_batches
    ]
    count = int(getattr(data, "delivery_complete_count", -1))
    await coordinator.write_state(
        key, int(data.state_epoch), int(data.leader_epoch), int(data.start_offset), batches, count
    )
    return {}


async def handle(ctx: RequestContext[WriteShareGroupStateRequest]) -> Any:
    return await answer_partitions(ctx, "WriteStateResult", _write, {})
