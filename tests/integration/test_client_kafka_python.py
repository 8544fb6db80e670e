"""kafka-python 3.0 against a real broker."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from odradek.testing import BrokerRunner


def test_produce_consume_in_order(odradek_broker: BrokerRunner) -> None:
    admin = KafkaAdminClient(bootstrap_servers=odradek_broker.bootstrap_servers)
    admin.create_topics([NewTopic("kp", num_partitions=3, replication_factor=1)])
    assert "kp" in admin.list_topics()
    admin.close()
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, linger_ms=5)
    sent: dict[int, list[tuple[bytes | None, bytes]]] = {0: [], 1: [], 2: []}
    futures = []
    for i in range(300):
        key = None if i % 11 == 0 else b"k%d" % i
        value = b"value-%d" % i
        headers = [("n", b"%d" % i)] if i % 5 == 0 else []
        futures.append(producer.send("kp", value=value, key=key, partition=i % 3, headers=headers))
        sent[i % 3].append((key, value))
    producer.flush()
    metas = [f.get(timeout=10) for f in futures]
    assert all(m.offset >= 0 for m in metas)
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=odradek_broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
        auto_offset_reset="earliest",
    )
    tps = [TopicPartition("kp", p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got: dict[int, list] = {0: [], 1: [], 2: []}
    headers_seen = 0
    for msg in consumer:
        got[msg.partition].append((msg.key, msg.value))
        assert msg.offset == len(got[msg.partition]) - 1
        if msg.headers:
            headers_seen += 1
            assert msg.headers[0][0] == "n"
        if sum(len(v) for v in got.values()) == 300:
            break
    end = consumer.end_offsets(tps)
    consumer.close()
    assert got == sent
    assert headers_seen == 60
    assert {tp.partition: off for tp, off in end.items()} == {0: 100, 1: 100, 2: 100}


def test_compression_gzip_and_lz4(odradek_broker: BrokerRunner) -> None:
    for codec in ("gzip", "lz4", "zstd"):
        topic = f"kp-{codec}"
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, compression_type=codec)
        values = [f"{codec}-{i}".encode() * 10 for i in range(100)]
        for v in values:
            producer.send(topic, v)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=odradek_broker.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
            group_id=None,
        )
        got = [m.value for m in consumer]
        consumer.close()
        assert got == values


def test_an_advertised_localhost_is_answered_unchanged_and_served_on_both_loopback_addresses(
    odradek_broker_factory: Callable[..., BrokerRunner], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients key brokers by host:port (KafkaJS's pool, kafka-python's cluster metadata): the seed
    ``localhost:PORT`` must come back as ``localhost:PORT``, not as a second broker at 127.0.0.1.
    ``localhost`` resolves to ::1 first here, as where /etc/hosts lists both (this machine's lists
    127.0.0.1 only, so the resolver is given ::1 for it in this process): the broker listens on
    both addresses, one port, and a client following the advertised name over ::1 is served."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        found = real_getaddrinfo(host, port, family, type, proto, flags)
        if host == "localhost" and family in (0, socket.AF_INET6) and all(f != socket.AF_INET6 for f, *_ in found):
            found = real_getaddrinfo("::1", port, socket.AF_INET6, type, proto, flags) + found
        return found

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    broker = odradek_broker_factory(overrides={"listeners": "PLAINTEXT://localhost:0"})
    port = broker.port
    assert broker.bootstrap_servers == f"localhost:{port}"
    assert broker.broker is not None
    bound = sorted(
        (sock.family, sock.getsockname()[:2])
        for server in broker.broker.socket_server.servers
        for sock in server.sockets
    )
    assert bound == [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))]

    async def peers() -> set[str]:
        assert broker.broker is not None
        return {c.peer.rsplit(":", 1)[0] for c in broker.broker.socket_server.connections}

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")  # then the advertised localhost, ::1 first
    sent = producer.send("advertised", b"v").get(timeout=10)
    assert broker.call(peers) >= {"::1"}  # the only client so far came in on 127.0.0.1
    producer.close()
    for seed in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        admin = KafkaAdminClient(bootstrap_servers=seed)
        brokers = admin.describe_cluster()["brokers"]
        admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [("localhost", port)], seed
    librdkafka = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in librdkafka.brokers.values()] == [("localhost", port)]

    consumer = KafkaConsumer(
        bootstrap_servers=f"localhost:{port}", auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    consumer.assign([TopicPartition("advertised", sent.partition)])
    assert next(consumer).value == b"v"
    consumer.close()
