"""Huge requests on a 3-broker cluster on a real ZooKeeper: sent to a non-controller and to the
controller, each is refused at once, the controller keeps working (a topic created right after
gets its leaders), and a kill -9 of a partition leader during them still fails over within the
usual time (the ZooKeeper session, 6 s here, plus the election)."""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.cli.cluster import LocalCluster
from odradek.errors import ErrorCode
from odradek.protocol.codec import api_schema
from odradek.protocol.messages import build, nested
from odradek.testing_zk import ZooKeeperServer

from .limits_support import ANSWER_WITHIN_S, HUGE, call, create_topics_request

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(240)]

FAILOVER_BOUND_S = 20.0
"""Session timeout (6 s) + detection and election, with room for a loaded machine."""


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(3, zookeeper_connect=zookeeper_server.chroot_connect())


def _controller(cluster: LocalCluster) -> int:
    data = cluster.read_znode("/controller")
    assert data is not None
    return int(json.loads(data)["brokerid"])


def _leader(cluster: LocalCluster, topic: str) -> int:
    data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state")
    return int(json.loads(data)["leader"]) if data else -1


def _huge_reassignment(topic: str) -> Any:
    schema = api_schema(45, 0)
    partition = build(
        nested(schema.request_type, "ReassignablePartition"), partition_index=0, replicas=tuple(range(5000))
    )
    entry = build(nested(schema.request_type, "ReassignableTopic"), name=topic, partitions=(partition,))
    return build(schema.request_type, timeout=datetime.timedelta(milliseconds=HUGE), topics=(entry,))


def test_huge_requests_leave_the_controller_responsive_and_failover_on_time(cluster: LocalCluster) -> None:
    controller = _controller(cluster)
    others = [b for b in cluster.alive_ids() if b != controller]
    victim = others[0]
    steady = create_topics_request({"name": "steady", "assign": {0: [victim, others[1], controller]}})
    assert [t.error_code for t in call(cluster.broker(controller), 19, 7, steady, 30).topics] == [ErrorCode.none]
    cluster.wait_until(lambda: _leader(cluster, "steady") == victim, 30, message="steady led by the victim")

    answers: dict[str, tuple[Any, float]] = {}

    def send(name: str, broker_id: int, api_key: int, version: int, request: Any) -> None:
        started = time.monotonic()
        answers[name] = (call(cluster.broker(broker_id), api_key, version, request), time.monotonic() - started)

    huge = create_topics_request({"name": "steady", "partitions": HUGE, "rf": 3}, {"name": "huge", "partitions": HUGE})
    senders = [
        threading.Thread(target=send, args=("non-controller", others[1], 19, 7, huge)),
        threading.Thread(target=send, args=("controller", controller, 19, 7, huge)),
        threading.Thread(target=send, args=("reassignment", controller, 45, 0, _huge_reassignment("steady"))),
    ]
    killed = time.monotonic()
    cluster.kill9(victim)
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(30)
    for name in ("non-controller", "controller"):
        response, took = answers[name]
        assert took < ANSWER_WITHIN_S, (name, took)
        assert [t.error_code for t in response.topics] == [ErrorCode.invalid_partitions] * 2, name
    response, took = answers["reassignment"]
    assert took < ANSWER_WITHIN_S
    errors = [p.error_code for t in response.responses for p in t.partitions]
    assert errors == [ErrorCode.invalid_replica_assignment]

    cluster.wait_until(
        lambda: _leader(cluster, "steady") not in (-1, victim), FAILOVER_BOUND_S, message="steady fails over"
    )
    failover_s = time.monotonic() - killed
    print(f"failover after kill -9 of broker {victim} during the huge requests: {failover_s:.1f} s")

    started = time.monotonic()
    after = call(
        cluster.broker(controller), 19, 7, create_topics_request({"name": "after", "partitions": 3, "rf": 2}), 30
    )
    assert [t.error_code for t in after.topics] == [ErrorCode.none]
    assert time.monotonic() - started < 10
    cluster.restart(victim)
