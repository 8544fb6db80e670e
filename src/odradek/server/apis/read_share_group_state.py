"""ReadShareGroupState (key 84): a share-partition's leader reads its durable state (KIP-932,
inter-broker).

v0. Each partition: the share coordinator's ``read_state``: the state epoch, the start offset and
the state batches. A leader epoch (other than -1) below the recorded one is FENCED_LEADER_EPOCH, a
higher one is recorded before the answer; a share-partition never initialized is INVALID_REQUEST
("Read state called on uninitialized share partition."). Authorization, ownership and the other
errors as in :mod:`.share_state_support`; an error answers state epoch 0, start offset 0, no batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_state_support import answer_partitions
from odradek.server.request import RequestContext
from odradek.share.state import SharePartitionKey

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import ReadShareGroupStateRequest

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[ReadShareGroupStateRequest]) -> Any:
    async def read(coordinator: ShareCoordinator, key: SharePartitionKey, data: Any) -> dict[str, Any]:
        state = await coordinator.read_state(key, int(data.leader_epoch))
        batches = tuple(
            ctx.make(
                "StateBatch",
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=int(b.delivery_state),
                delivery_count=b.delivery_count,
            )
            for b in state.batches
        )
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": batches}

    return await answer_partitions(
        ctx, "ReadStateResult", read, {"state_epoch": 0, "start_offset": 0, "state_batches": ()}
    )
