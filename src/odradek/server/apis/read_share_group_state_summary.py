"""ReadShareGroupStateSummary (key 87): a share group's coordinator reads share-partitions' start
offsets (DescribeShareGroupOffsets; KIP-932, inter-broker).

v0..v1 (v1 adds the delivery-complete count, KIP-1226). Each partition: the share coordinator's
``read_summary``: state epoch, leader epoch, start offset; a share-partition never initialized
answers start offset -1, leader epoch -1, state epoch 0 (and count -1). The leader epoch is not
checked. Authorization, ownership and the other errors as in :mod:`.share_state_support`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_state_support import answer_partitions
from odradek.server.request import RequestContext
from odradek.share.state import UNINITIALIZED_START_OFFSET, UNINITIALIZED_STATE_EPOCH, SharePartitionKey

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import ReadShareGroupStateSummaryRequest

API_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
MIN_VERSION = 0
MAX_VERSION = 1

_UNINITIALIZED = {
    "state_epoch": UNINITIALIZED_STATE_EPOCH,
    "leader_epoch": -1,
    "start_offset": UNINITIALIZED_START_OFFSET,
    "delivery_complete_count": -1,
}


async def _summary(coordinator: ShareCoordinator, key: SharePartitionKey, data: Any) -> dict[str, Any]:
    summary = await coordinator.read_summary(key, int(data.leader_epoch))
    if summary is None:
        return dict(_UNINITIALIZED)
    return {
        "state_epoch": summary.state_epoch,
        "leader_epoch": summary.leader_epoch,
        "start_offset": summary.start_offset,
        "delivery_complete_count": summary.delivery_complete_count,
    }


async def handle(ctx: RequestContext[ReadShareGroupStateSummaryRequest]) -> Any:
    return await answer_partitions(
        ctx, "ReadStateSummaryResult", _summary, {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0}
    )
