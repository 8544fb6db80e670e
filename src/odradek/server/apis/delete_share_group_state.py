"""DeleteShareGroupState (key 86): a share group's coordinator deletes share-partitions' state
(the group, or its offsets on a topic, deleted; KIP-932, inter-broker).

v0. Each partition: the share coordinator's ``delete_state`` (a tombstone; nothing for a
share-partition it does not know). Authorization, ownership and the other errors as in
:mod:`.share_state_support`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_state_support import answer_partitions
from odradek.server.request import RequestContext
from odradek.share.state import SharePartitionKey

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import DeleteShareGroupStateRequest

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
MIN_VERSION = 0
MAX_VERSION = 0


async def _delete(coordinator: ShareCoordinator, key: SharePartitionKey, _data: Any) -> dict[str, Any]:
    await coordinator.delete_state(key)
    return {}


async def handle(ctx: RequestContext[DeleteShareGroupStateRequest]) -> Any:
    return await answer_partitions(ctx, "DeleteStateResult", _delete, {})
