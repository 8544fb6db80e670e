"""The ShareGroupHeartbeat and ShareGroupDescribe handlers over fakes: the request handed to the
share groups, the assignment by topic id, Kafka's authorization (READ on the group, DESCRIBE on
subscribed and assigned topics, DESCRIBE on each described group) and the error answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

from odradek.coordinator.group.share_group import ShareGroup, ShareTopic
from odradek.coordinator.group.share_membership import (
    ShareGroupConfig,
    ShareGroupMembership,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from odradek.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.apis import share_group_describe, share_group_heartbeat
from odradek.server.auth_helper import AUTHORIZED_OPERATIONS_OMITTED

from .api_fakes import FakeMetadataCache, FakeServices, call


class Cache(FakeMetadataCache):
    def partition_count(self, name: str) -> int | None:
        meta = self.topics.get(name)
        return None if meta is None else len(meta.partitions)


class FakeShareGroups:
    """Heartbeats answered by a real membership (no timers fire); the requests kept."""

    def __init__(self) -> None:
        self.membership = ShareGroupMembership(ShareGroupConfig(), lambda _ms, _fn: _NoTimer())
        self.requests: list[ShareHeartbeat] = []

    async def heartbeat(self, req: ShareHeartbeat, topics: Mapping[str, ShareTopic]) -> ShareHeartbeatResult:
        self.requests.append(req)
        return self.membership.heartbeat(req, topics)

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        group = self.membership.group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, f"Group {group_id} not found.", None
        return ErrorCode.none, None, group


class _NoTimer:
    def cancel(self) -> None:
        pass


@dataclass
class Coordinator:
    share_groups: FakeShareGroups = field(default_factory=FakeShareGroups)


@dataclass
class DenyingAuthorizer:
    """Allows everything but the (operation, resource type, name) triples in ``denied``."""

    denied: set[tuple[AclOperation, ResourceType, str]] = field(default_factory=set)

    def authorize(
        self, principal: Any, host: str, operation: AclOperation, resource_type: ResourceType, name: str, **_: Any
    ) -> bool:
        return (operation, resource_type, name) not in self.denied


def _services(authorizer: DenyingAuthorizer | None = None) -> FakeServices:
    services = FakeServices(metadata_cache=Cache({"t": 2, "u": 1}), group_coordinator=Coordinator())  # type: ignore[arg-type]
    services.authorizer = authorizer  # type: ignore[assignment]
    return services


def _beat(services: FakeServices, member_epoch: int = 0, topics: tuple[str, ...] | None = ("t",)) -> Any:
    req = ShareGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=member_epoch, rack_id=None, subscribed_topic_names=topics
    )
    return call(share_group_heartbeat, services, 1, req)


def _describe(services: FakeServices, *groups: str, include: bool = False) -> Any:
    req = ShareGroupDescribeRequest(group_ids=groups, include_authorized_operations=include)
    return call(share_group_describe, services, 1, req)


def test_a_join_is_answered_with_its_assignment_by_topic_id() -> None:
    services = _services()
    response = _beat(services)
    assert response.error_code == ErrorCode.none and response.member_id == "m1" and response.member_epoch == 1
    assert response.heartbeat_interval.total_seconds() == 5
    t_id = services.metadata_cache.topics["t"].topic_id
    assert [(tp.topic_id, tuple(tp.partitions)) for tp in response.assignment.topic_partitions] == [(t_id, (0, 1))]
    (req,) = services.group_coordinator.share_groups.requests  # type: ignore[attr-defined]
    assert (req.client_id, req.client_host, req.subscribed_topic_names) == ("client-1", "/10.0.0.1", ("t",))
    assert _beat(services, 1, None).assignment is None  # nothing changed


def test_heartbeat_errors_carry_no_member() -> None:
    response = _beat(_services(), 0, None)
    assert response.error_code == ErrorCode.invalid_request and response.member_id is None
    assert response.member_epoch == 0 and response.assignment is None


def test_heartbeats_need_read_on_the_group_and_describe_on_the_topics() -> None:
    group_denied = _services(DenyingAuthorizer({(AclOperation.READ, ResourceType.GROUP, "g")}))
    assert _beat(group_denied).error_code == ErrorCode.group_authorization_failed
    topic_denied = _services(DenyingAuthorizer({(AclOperation.DESCRIBE, ResourceType.TOPIC, "u")}))
    assert _beat(topic_denied, topics=("t", "u")).error_code == ErrorCode.topic_authorization_failed
    assert _beat(topic_denied, topics=("t",)).error_code == ErrorCode.none
    assert not topic_denied.group_coordinator.share_groups.requests[1:]  # type: ignore[attr-defined]


def test_describe_shows_members_and_answers_unknown_groups() -> None:
    services = _services()
    _beat(services)
    response = _describe(services, "g", "nope")
    found, missing = response.groups
    assert (found.error_code, found.group_state, found.assignor_name) == (ErrorCode.none, "Stable", "simple")
    assert (found.group_epoch, found.assignment_epoch) == (1, 1)
    assert found.authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    (member,) = found.members
    assert (member.member_id, member.client_id, member.client_host) == ("m1", "client-1", "/10.0.0.1")
    assert member.subscribed_topic_names == ("t",) and member.member_epoch == 1
    (tp,) = member.assignment.topic_partitions
    assert (tp.topic_name, tuple(tp.partitions)) == ("t", (0, 1))
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found, "Group nope not found.")
    assert (missing.group_state, missing.group_epoch, missing.members) == ("", 0, ())


def test_describe_authorizes_each_group_and_the_assigned_topics() -> None:
    services = _services(DenyingAuthorizer({(AclOperation.DESCRIBE, ResourceType.GROUP, "other")}))
    _beat(services)
    found, denied = _describe(services, "g", "other", include=True).groups
    assert found.error_code == ErrorCode.none and found.authorized_operations > 0
    assert denied.error_code == ErrorCode.group_authorization_failed
    services.authorizer = DenyingAuthorizer({(AclOperation.DESCRIBE, ResourceType.TOPIC, "t")})  # type: ignore[assignment]
    (hidden,) = _describe(services, "g").groups
    assert hidden.error_code == ErrorCode.topic_authorization_failed and hidden.members == ()
