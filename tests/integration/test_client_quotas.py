"""Client quotas against one real broker: set with ``odradek configs`` (AlterClientQuotas), read
back (DescribeClientQuotas), and a confluent-kafka producer held to its ``producer_byte_rate``
with the throttle time reported to the client (KIP-219)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from odradek.cli import configs
from odradek.server.runner import BrokerRunner

from .admin_support import create

QUOTA = 200_000  # bytes/s
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}  # short windows: a short test


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("quota-broker")), WINDOWS).start()
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
