"""InitializeShareGroupState (key 83): a share group's coordinator sets a share-partition's state
epoch and start offset before the group first consumes it (KIP-932, inter-broker).

v0. Each partition: the share coordinator's ``initialize_state``: a state epoch below the kept one
is FENCED_STATE_EPOCH; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. Authorization,
ownership and the other errors as in :mod:`.share_state_support`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_state_support import answer_partitions
from odradek.server.request import RequestContext
from odradek.share.state import SharePartitionKey

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import InitializeShareGroupStateRequest

API_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0


async def _initialize(coordinator: ShareCoordinator, key: SharePartitionKey, data: Any) -> dict[str, Any]:
    await coordinator.initialize_state(key, int(data.state_epoch), int(data.start_offset))
    return {}


async def handle(ctx: RequestContext[InitializeShareGroupStateRequest]) -> Any:
    return await answer_partitions(ctx, "InitializeStateResult", _initialize, {})
