"""One client cut alone: a one-broker campaign cluster whose SOLO listener's connections are the
proxy's node ``solo``. Cutting ``solo`` from the broker stops that client only; the clients of
the PLAINTEXT listener (node ``client``) still write, and the solo client writes again after
the heal (its Metadata answers named the SOLO endpoints, so it never bypassed the cut)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.cluster import SOLO_CLIENT, ChaosCluster
from chaos.workloads import client_config

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(120)]

ONE_BROKER = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}


def _write(bootstrap: str) -> object:
    """One record with a 2 s delivery timeout: None when acknowledged, else the error."""
    producer = Producer(client_config(bootstrap, **{"message.timeout.ms": 2000}))
    outcome: list[object] = []
    producer.produce("t", b"x", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(5)
    return outcome[0] if outcome else "no delivery report"


def test_the_solo_client_alone_is_cut_from_a_broker(tmp_path: Path) -> None:
    cluster = ChaosCluster(1, tmp_path / "cluster", ONE_BROKER).start()
    try:
        cluster.create_topic("t", 1, 1, {})
        assert _write(cluster.solo_bootstrap_servers) is None
        cluster.proxy.cut(SOLO_CLIENT, "b1")
        assert _write(cluster.solo_bootstrap_servers) is not None
        assert _write(cluster.bootstrap_servers) is None
        cluster.proxy.heal()
        assert _write(cluster.solo_bootstrap_servers) is None
    finally:
        cluster.close()
