"""A consumer group's target assignment (KIP-848): its server-side assignor
(:mod:`.consumer_assignors`) applied to the members' subscriptions, with what the members
currently hold as the assignor's starting point (so ``uniform`` moves as little as it can).

Pure; event loop or any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.coordinator.group.consumer_assignors import (
    ASSIGNORS,
    GroupSpec,
    MemberSubscription,
    SubscribedTopicDescriber,
    assignor_for,
)
from odradek.coordinator.group.consumer_group import Assignment

__all__ = ["ASSIGNORS", "assign"]


def assign(
    name: str,
    subscriptions: Mapping[str, frozenset[str]],
    topics: Mapping[str, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Member -> topic -> partitions by assignor ``name`` (``UnsupportedAssignorError`` when it is
    not one of :data:`ASSIGNORS`); ``topics``: each subscribed topic's partition count,
    ``current``: each member's previous target."""
    spec = GroupSpec.of(
        (MemberSubscription(member, subs) for member, subs in subscriptions.items()),
        {member: current.get(member, {}) for member in subscriptions},
    )
    return assignor_for(name).assign(spec, SubscribedTopicDescriber(dict(topics)))
