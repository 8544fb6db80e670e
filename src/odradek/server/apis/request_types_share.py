"""The request bodies of the share-group state APIs (KIP-932's inter-broker APIs 83-87) the
handlers of :mod:`odradek.server.apis` serve, as unions over the generated request classes of each
API's served versions, as in :mod:`odradek.server.apis.request_types`.

Handlers import this module for annotations only (under ``TYPE_CHECKING``).
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.delete_share_group_state import v0 as delete_share_group_state_v0
from kio.schema.initialize_share_group_state import v0 as initialize_share_group_state_v0
from kio.schema.read_share_group_state import v0 as read_share_group_state_v0
from kio.schema.read_share_group_state_summary import v0 as read_share_group_state_summary_v0
from kio.schema.read_share_group_state_summary import v1 as read_share_group_state_summary_v1
from kio.schema.write_share_group_state import v0 as write_share_group_state_v0
from kio.schema.write_share_group_state import v1 as write_share_group_state_v1

__all__ = [
    "DeleteShareGroupStateRequest",
    "InitializeShareGroupStateRequest",
    "ReadShareGroupStateRequest",
    "ReadShareGroupStateSummaryRequest",
    "ShareGroupStateRequest",
    "WriteShareGroupStateRequest",
]

InitializeShareGroupStateRequest: TypeAlias = initialize_share_group_state_v0.InitializeShareGroupStateRequest
"""initialize_share_group_state v0."""

ReadShareGroupStateRequest: TypeAlias = read_share_group_state_v0.ReadShareGroupStateRequest
"""read_share_group_state v0."""

WriteShareGroupStateRequest: TypeAlias = (
    write_share_group_state_v0.WriteShareGroupStateRequest | write_share_group_state_v1.WriteShareGroupStateRequest
)
"""write_share_group_state v0..v1."""

DeleteShareGroupStateRequest: TypeAlias = delete_share_group_state_v0.DeleteShareGroupStateRequest
"""delete_share_group_state v0."""

ReadShareGroupStateSummaryRequest: TypeAlias = (
    read_share_group_state_summary_v0.ReadShareGroupStateSummaryRequest
    | read_share_group_state_summary_v1.ReadShareGroupStateSummaryRequest
)
"""read_share_group_state_summary v0..v1."""

ShareGroupStateRequest: TypeAlias = (
    InitializeShareGroupStateRequest
    | ReadShareGroupStateRequest
    | WriteShareGroupStateRequest
    | DeleteShareGroupStateRequest
    | ReadShareGroupStateSummaryRequest
)
"""Any of the five."""
