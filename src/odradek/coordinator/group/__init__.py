"""Consumer groups and committed offsets, coordinated by the broker (Kafka's classic protocol).

- :mod:`.state` the group states, their transition table and each request's answer per state;
- :mod:`.schemas` the ``__consumer_offsets`` record schemas and the consumer protocol;
- :mod:`.member`, :mod:`.group` a member and a group's metadata (members, generation, offsets);
- :mod:`.manager` the groups of the partitions this broker leads: load, store, expire;
- :mod:`.membership` JoinGroup / SyncGroup / Heartbeat / LeaveGroup and the rebalance timers;
- :mod:`.coordinator` the front door the request handlers call;
- :mod:`.consumer_assignors` the consumer protocol's (KIP-848) server assignors, ``uniform`` and ``range``;
- share groups (KIP-932): :mod:`.share_group` (state), :mod:`.share_assignor` (``simple``),
  :mod:`.share_membership` (ShareGroupHeartbeat, timers), :mod:`.share_schemas` and
  :mod:`.share_persistence` (their ``__consumer_offsets`` records), :mod:`.share_groups` (what the
  coordinator holds: writes, share-partition state initialization, describe, list, delete).
"""

from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.state import GroupState

__all__ = ["GroupCoordinator", "GroupState"]
