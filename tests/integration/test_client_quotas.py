"""Client quotas against one real broker: set with ``odradek configs`` (AlterClientQuotas), read
back (DescribeClientQuotas), and a confluent-kafka producer held to its ``producer_byte_rate``
with the throttle time reported to the client (KIP-219)."""

from __future__ import annotations

import asyncio
import datetime
import selectors
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek.cli import configs
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.server.runner import BrokerRunner

from .admin_support import create

QUOTA = 200_000  # bytes/s
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}  # short windows: a short test


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    overrides = {**WINDOWS, "metrics.listener": "http://127.0.0.1:0"}
    runner = BrokerRunner(str(tmp_path_factory.mktemp("quota-broker")), overrides).start()
    try:
        yield runner
    finally:
        runner.stop()


def test_quotas_with_the_configs_tool(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    user_client = ["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "app"]
    assert configs.main([*bs, "--alter", *user_client, "--add-config", "request_percentage=150.5"]) == 0
    assert capsys.readouterr().out.strip() == "Completed updating default config for users in the cluster."
    assert configs.main([*bs, "--describe", *user_client]) == 0
    assert capsys.readouterr().out.strip() == (
        "Quota configs for the default user-principal, client-id 'app' are request_percentage=150.5"
    )
    assert configs.main([*bs, "--alter", *user_client, "--add-config", "producer_byte_rate=1.5"]) == 1
    assert "Configuration producer_byte_rate must be a LONG value" in capsys.readouterr().err
    assert configs.main([*bs, "--alter", *user_client, "--delete-config", "request_percentage"]) == 0
    capsys.readouterr()
    assert configs.main([*bs, "--describe", "--entity-type", "clients"]) == 0
    assert capsys.readouterr().out == ""


def test_a_producer_is_held_to_its_byte_rate_and_told_the_throttle_time(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    create(broker, "quota-t")
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    client = ["--entity-type", "clients", "--entity-name", "slow-producer"]
    assert configs.main([*bs, "--alter", *client, "--add-config", f"producer_byte_rate={QUOTA}"]) == 0
    capsys.readouterr()
    throttles: list[int] = []
    delivered = [0]

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            delivered[0] += 1000

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "slow-producer",
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.kbytes": 64,  # a small local queue: what is sent is what is delivered
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    value = b"x" * 1000
    started = time.monotonic()
    while time.monotonic() - started < 5.0:
        try:
            producer.produce("quota-t", value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    rate = delivered[0] / (time.monotonic() - started)
    producer.flush(30)
    # two 1 s windows: a short burst gets through, then the rate is held near the quota
    assert QUOTA * 0.5 < rate < QUOTA * 1.5, f"{rate:.0f} B/s with a quota of {QUOTA} B/s"
    assert throttles and max(throttles) > 0, "the broker reported no throttle time"


def test_a_consumer_fetch_is_capped_by_its_quota_window_and_a_throttled_fetch_answers_nothing(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's handleFetchRequest with ``consumer_byte_rate``: a Fetch answers at most quota x
    (samples - 1) x window bytes, and once the rate is over the quota the answer carries
    ``throttle_time_ms`` and no partitions (the bytes are taken back: the same records come later).
    A confluent consumer under the same quota still reads every record, each once."""
    create(broker, "quota-fetch")
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    client = ["--entity-type", "clients", "--entity-name", "slow-consumer"]
    assert configs.main([*bs, "--alter", *client, "--add-config", f"consumer_byte_rate={QUOTA}"]) == 0
    capsys.readouterr()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    records = 60
    for i in range(records):
        producer.produce("quota-fetch", value=b"%04d" % i + b"x" * 9_996, partition=0)
        assert producer.flush(10) == 0  # one batch per record: the cap is met batch by batch
    host, port = broker.bootstrap_servers.split(":")

    async def fetch_twice() -> list[tuple[int, int, int]]:
        answers = []
        async with KafkaConnection(host, int(port), client_id="slow-consumer") as conn:
            for _ in range(2):
                rb = conn.builder(1, 12, 12)
                part = rb.make("FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=10 << 20)
                topics = (rb.make("FetchTopic", topic="quota-fetch", partitions=(part,)),)
                answer = await conn.send(
                    rb(
                        max_wait=datetime.timedelta(0),
                        min_bytes=0,
                        max_bytes=10 << 20,
                        topics=topics,
                        forgotten_topics_data=(),
                    )
                )
                size = sum(len(p.records or b"") for t in answer.responses for p in t.partitions)
                throttle_ms = int(answer.throttle_time.total_seconds() * 1000)
                answers.append((len(answer.responses), size, throttle_ms))
        return answers

    answers = asyncio.run(fetch_twice())
    (first_topics, first_size, first_throttle), (second_topics, _, second_throttle) = answers
    assert first_topics == 1 and 0 < first_size <= QUOTA + 10_100  # capped (the first batch always fits)
    assert first_throttle > 0 or second_throttle > 0
    throttled = (first_topics, first_throttle) if first_throttle > 0 else (second_topics, second_throttle)
    assert throttled[0] == 0  # a throttled answer holds no partition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "slow-consumers",
            "client.id": "slow-consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: list[int] = []
    deadline = time.monotonic() + 30
    try:
        consumer.subscribe(["quota-fetch"])
        while len(seen) < records and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(int(msg.value()[:4]))
    finally:
        consumer.close()
    assert seen == list(range(records))


def _request_time(broker: BrokerRunner, client_id: str) -> float | None:
    """``kafka_server_request_request_time`` of ``client_id`` (percent of one handler thread)."""
    assert broker.broker is not None and broker.broker.metrics.bound is not None
    host, port = broker.broker.metrics.bound
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_server_request_request_time" and sample.labels["client_id"] == client_id:
                return float(sample.value)
    return None


def test_request_percentage_throttles_a_busy_client_and_bounds_its_handler_time(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's RequestQuotaManager: each request's handler time counts (x 100 per second) against
    ``request_percentage``; over it the answer carries ``throttle_time_ms`` and the channel is
    muted, so the client's handler time per second stays near its quota."""
    create(broker, "quota-req")
    percent = 5.0
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    client = ["--entity-type", "clients", "--entity-name", "busy-client"]
    assert configs.main([*bs, "--alter", *client, "--add-config", f"request_percentage={percent}"]) == 0
    capsys.readouterr()
    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "busy-client",
            "linger.ms": 0,  # one small Produce request per record: many requests
            "queue.buffering.max.kbytes": 16,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    measured: list[float] = []
    started = time.monotonic()
    next_scrape = started + 2.0  # past the first window's burst (Kafka's Rate allows one window's worth)
    while time.monotonic() - started < 5.0:
        try:
            producer.produce("quota-req", b"x" * 100)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if time.monotonic() >= next_scrape:
            next_scrape += 0.5
            value = _request_time(broker, "busy-client")
            if value is not None:
                measured.append(value)
    producer.flush(30)
    assert throttles and max(throttles) > 0, "the broker reported no throttle time"
    assert measured, "no kafka_server_request_request_time for the client"
    # a throttled request is already counted, so the rate may stand above the quota by what one
    # request adds until the mute ends (measured: 5.0 +- 0.02 on a quiet machine); it does not grow
    assert max(measured) < percent * 3, f"request time {measured} with request_percentage={percent}"


def test_controller_mutation_rate_refuses_topics_over_it_and_throttles_older_versions(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """KIP-599 with Kafka's strict and permissive quotas: 2 partitions/s, a burst of 4 (2 windows).
    CreateTopics v7 of four 2-partition topics: three are created (the third takes the bucket
    below zero), the fourth is refused with THROTTLING_QUOTA_EXCEEDED and throttle_time_ms; a
    confluent-kafka admin client (an older, permissive version) gets every topic and the throttle."""
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    for client in ("mutator", "rd-mutator"):
        entity = ["--entity-type", "clients", "--entity-name", client]
        assert configs.main([*bs, "--alter", *entity, "--add-config", "controller_mutation_rate=2"]) == 0
    capsys.readouterr()
    host, port = broker.bootstrap_servers.split(":")

    async def create_four() -> tuple[dict[str, int], int]:
        async with KafkaConnection(host, int(port), client_id="mutator") as conn:
            rb = conn.builder(19, 7, 7)
            topics = tuple(
                rb.make(
                    "CreatableTopic", name=f"cm-{i}", num_partitions=2, replication_factor=1, assignments=(), configs=()
                )
                for i in range(4)
            )
            answer = await conn.send(rb(topics=topics, timeout=datetime.timedelta(seconds=10), validate_only=False))
            return {t.name: int(t.error_code) for t in answer.topics}, int(answer.throttle_time.total_seconds() * 1000)

    errors, throttle_ms = asyncio.run(create_four())
    assert errors == {"cm-0": 0, "cm-1": 0, "cm-2": 0, "cm-3": ErrorCode.throttling_quota_exceeded}
    assert 500 < throttle_ms <= 1000  # -(-2 partitions) / 2 per second, less the time since

    throttles: list[float] = []
    admin = AdminClient(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "rd-mutator",
            "throttle_cb": lambda e: throttles.append(e.throttle_time),
        }
    )
    futures = admin.create_topics([NewTopic(f"cm-rd-{i}", 2, 1) for i in range(4)], operation_timeout=10)
    for future in futures.values():
        future.result(15)  # all four created: librdkafka sends a permissive version (< 6)
    deadline = time.monotonic() + 5
    while not throttles and time.monotonic() < deadline:
        admin.poll(0.1)
    assert throttles and max(throttles) > 0


def test_kafka_python_admin_is_refused_topic_mutations_once_its_bucket_is_in_debt(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """controller_mutation_rate=5 (a burst of 10 with the module's 2 windows): kafka-python sends
    CreateTopics v7, CreatePartitions v3 and DeleteTopics v6 (strict versions). A 40-partition
    topic passes (the bucket goes to -30, six seconds of debt); at once a second topic, more
    partitions and the deletion are refused with THROTTLING_QUOTA_EXCEEDED and nothing changes."""
    from kafka import errors as kafka_errors
    from kafka.admin import KafkaAdminClient, NewPartitions

    bs = ["--bootstrap-server", broker.bootstrap_servers]
    entity = ["--entity-type", "clients", "--entity-name", "kp-mutator"]
    assert configs.main([*bs, "--alter", *entity, "--add-config", "controller_mutation_rate=5"]) == 0
    capsys.readouterr()
    assert configs.main([*bs, "--describe", *entity]) == 0
    assert capsys.readouterr().out.strip() == (
        "Quota configs for client-id 'kp-mutator' are controller_mutation_rate=5.0"
    )
    admins: list[KafkaAdminClient] = []

    def admin() -> KafkaAdminClient:
        """A new client (connection) with the same client id: kafka-python holds back any request
        on a connection the broker throttled, so each refusal is asked on a fresh one."""
        admins.append(KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kp-mutator"))
        return admins[-1]

    try:
        first = admin()
        created = first.create_topics({"kp-cm-big": {"num_partitions": 40, "replication_factor": 1}})
        assert [t["error_code"] for t in created["topics"]] == [0]
        one = {"kp-cm-next": {"num_partitions": 1, "replication_factor": 1}}
        refused = first.create_topics(one, raise_errors=False)
        assert [t["error_code"] for t in refused["topics"]] == [ErrorCode.throttling_quota_exceeded]
        assert refused["topics"][0]["error_message"] == "The throttling quota has been exceeded."
        with pytest.raises(kafka_errors.ThrottlingQuotaExceededError):
            admin().create_partitions({"kp-cm-big": NewPartitions(total_count=41)})
        with pytest.raises(kafka_errors.ThrottlingQuotaExceededError):
            admin().delete_topics(["kp-cm-big"])
        topics = admin().list_topics()
        assert "kp-cm-big" in topics and "kp-cm-next" not in topics
    finally:
        for client in admins:
            client.close()


def test_connection_creation_rate_of_an_ip_closes_connections_over_it_after_the_throttle(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    """KIP-612: ``connection_creation_rate`` of ``/config/ips/127.0.0.1`` (2 per second over two
    1 s windows): two quick connections are served, the next ones are closed by the broker after
    their throttle time (not at once), and a connection once the rate allows is served again."""
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    entity = ["--entity-type", "ips", "--entity-name", "127.0.0.1"]
    assert configs.main([*bs, "--alter", *entity, "--add-config", "connection_creation_rate=2"]) == 0
    assert configs.main([*bs, "--describe", *entity]) == 0
    assert "connection_creation_rate=2" in capsys.readouterr().out
    host, port = broker.bootstrap_servers.split(":")
    try:
        time.sleep(2.2)  # the configs tool's own connections have left the rate (2 windows)
        sockets = [socket.create_connection((host, int(port)), timeout=5) for _ in range(4)]
        started = time.monotonic()
        closed_after: list[float | None] = [None] * len(sockets)
        with selectors.DefaultSelector() as selector:
            for i, sock in enumerate(sockets):
                selector.register(sock, selectors.EVENT_READ, i)
            while time.monotonic() - started < 2.0:
                for key, _ in selector.select(timeout=0.05):
                    closed_after[key.data] = time.monotonic() - started  # nothing is sent: EOF
                    selector.unregister(key.fileobj)
        for sock in sockets:
            sock.close()
        assert closed_after[:2] == [None, None]
        assert all(t is not None and 0.1 < t < 1.5 for t in closed_after[2:]), closed_after
        time.sleep(1.1)

        async def api_versions() -> int:
            async with KafkaConnection(host, int(port), client_id="after-throttle") as conn:
                return len(conn.api_versions)

        assert asyncio.run(api_versions()) > 0
    finally:
        assert configs.main([*bs, "--alter", *entity, "--delete-config", "connection_creation_rate"]) == 0
