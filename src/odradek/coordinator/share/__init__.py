"""The share coordinator (KIP-932): share-partitions' durable state in ``__share_group_state``.

- :mod:`.records`: the ShareSnapshot / ShareUpdate records, byte for byte, and the coordinator key;
- :mod:`.batches`: combining state batches (Kafka's ``PersisterStateBatchCombiner``);
- :mod:`.shard`: the state of one ``__share_group_state`` partition and its rules;
- :mod:`.coordinator`: :class:`ShareCoordinator`, on :mod:`odradek.coordinator.runtime`;
- :mod:`.config`: its ``share.coordinator.*`` settings.
"""

from odradek.coordinator.share.config import ShareCoordinatorConfig
from odradek.coordinator.share.coordinator import ShareCoordinator, ShareCoordinatorDeps

__all__ = ["ShareCoordinator", "ShareCoordinatorConfig", "ShareCoordinatorDeps"]
