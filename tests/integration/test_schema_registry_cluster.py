"""Three broker processes on a real ZooKeeper, each serving the schema registry
(``schema.registry.listener``): ``_schemas`` gets replication factor 3, one broker's registry
leads through ZooKeeper, and after that broker is killed -9 another takes over with ids unique."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from tests.integration.schema_registry_support import avro_record, call

from odradek.testing import LocalCluster

pytestmark = pytest.mark.timeout(180)
SERVES = re.compile(r"broker (\d+) serves the schema registry on (http://\S+)")


@pytest.fixture(scope="module")
def cluster(odradek_cluster_module: Callable[..., LocalCluster]) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(
        3, overrides={"schema.registry.listener": "http://127.0.0.1:0", "offsets.topic.replication.factor": "3"}
    )


def _urls(cluster: LocalCluster) -> dict[int, str]:
    found = {}
    for broker_id in cluster.brokers:
        text = cluster.broker(broker_id).log_path.read_text(errors="replace")
        for match in SERVES.finditer(text):
            found[int(match.group(1))] = match.group(2)
    return found if len(found) == len(cluster.brokers) else {}


def _leader(cluster: LocalCluster) -> str | None:
    data = cluster.read_znode("/schema_registry/schema_registry_master")
    if data is None:
        return None
    obj: dict[str, Any] = json.loads(data)
    return f"{obj['scheme']}://{obj['host']}:{obj['port']}"


def test_leader_broker_killed_ids_stay_unique(cluster: LocalCluster) -> None:
    urls = cluster.wait_until(lambda: _urls(cluster), 60, message="every broker's registry")
    leader = cluster.wait_until(lambda: _leader(cluster), 20, message="a registry leader")
    assert leader in urls.values()
    described = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics("_schemas", timeout=10)
    assert len(described.topics["_schemas"].partitions[0].replicas) == 3
    ids: dict[str, int] = {}
    for i, url in enumerate(sorted(urls.values()) * 2):
        status, body = call(url, "POST", f"/subjects/c-{i}/versions", {"schema": avro_record(f"C{i}", [])})
        assert status == 200, body
        ids[f"c-{i}"] = body["id"]
    assert len(set(ids.values())) == len(ids)
    leader_id = next(b for b, u in urls.items() if u == leader)
    cluster.kill9(leader_id)
    survivors = {b: u for b, u in urls.items() if b != leader_id}
    new_leader = cluster.wait_until(
        lambda: (lambda u: u if u in survivors.values() else None)(_leader(cluster)), 40, message="a new leader"
    )
    follower = next(u for u in survivors.values() if u != new_leader)

    def register(i: int) -> Any:
        status, body = call(follower, "POST", f"/subjects/c-{i}/versions", {"schema": avro_record(f"C{i}", [])})
        return body["id"] if status == 200 else None

    for i in range(6, 10):  # through the follower, forwarded to the new leader
        ids[f"c-{i}"] = cluster.wait_until(lambda i=i: register(i), 30, message="a registration after failover")
    assert len(set(ids.values())) == len(ids)
    for url in survivors.values():
        subjects = cluster.wait_until(
            lambda url=url: (lambda s: s if len(s) >= 10 else None)(call(url, "GET", "/subjects")[1]), 20
        )
        assert set(ids) <= set(subjects)
        for subject, schema_id in ids.items():
            assert call(url, "GET", f"/subjects/{subject}/versions/1")[1]["id"] == schema_id
