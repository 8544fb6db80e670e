"""KIP-848 regex subscriptions with ACLs on: a regex takes only the topics the subscribing
member's principal may DESCRIBE (Kafka 4's coordinator resolves it with that principal), and an
ACL granted later shows at the member's next heartbeat."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from odradek.client.connection import KafkaConnection
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.runner import BrokerRunner

from .authz_support import acl, grant, start_with_acls
from .group_config_support import coordinator_port, heartbeat

GROUP = "regex-group"
TOPICS = ("orders-eu", "orders-us", "orders-secret", "payments")


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any) -> BrokerRunner:
    """ANONYMOUS may read the group and describe orders-eu and orders-us (not orders-secret)."""
    runner = start_with_acls(
        odradek_broker_factory,
        str(tmp_path / "acl"),
        [
            acl(ResourceType.GROUP, GROUP, AclOperation.READ),
            acl(ResourceType.TOPIC, "orders-eu", AclOperation.DESCRIBE),
            acl(ResourceType.TOPIC, "orders-us", AclOperation.READ),  # READ implies DESCRIBE
            acl(ResourceType.TOPIC, "payments", AclOperation.DESCRIBE),
        ],
    )
    assert runner.broker is not None
    admin = runner.broker.admin
    for topic in TOPICS:
        runner.call(functools.partial(admin.create_topic, topic, 1, 1))
    return runner


def _assigned(response: Any, names: dict[uuid.UUID, str]) -> set[str]:
    assert response.error_code == 0, response
    assert response.assignment is not None
    return {names[t.topic_id] for t in response.assignment.topic_partitions if t.partitions}


def test_a_regex_takes_only_the_topics_the_member_may_describe(broker: BrokerRunner) -> None:
    assert broker.broker is not None
    cache = broker.broker.metadata_cache
    names = {cache.topic_id(t): t for t in TOPICS}

    async def scenario() -> None:
        async with KafkaConnection("127.0.0.1", broker.port) as conn:
            port = await coordinator_port(conn, GROUP, [broker])
            assert port == broker.port
            member = str(uuid.uuid4())
            joined = await heartbeat(conn, GROUP, member, 0, regex="orders-.*")
            assert _assigned(joined, names) == {"orders-eu", "orders-us"}  # not orders-secret
            grant(broker, acl(ResourceType.TOPIC, "orders-secret", AclOperation.DESCRIBE))
            owned = [(t.topic_id, t.partitions) for t in joined.assignment.topic_partitions]
            later = await heartbeat(conn, GROUP, member, joined.member_epoch, owned=owned)
            assert _assigned(later, names) == {"orders-eu", "orders-us", "orders-secret"}

    asyncio.run(scenario())
    group = broker.broker.group_coordinator.consumer_groups.group(GROUP)
    assert group is not None and group.resolved_regexes == {"orders-.*": frozenset(TOPICS[:3])}
