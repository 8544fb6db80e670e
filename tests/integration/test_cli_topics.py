"""``odradek topics``, ``console-producer`` and ``console-consumer`` run in-process against a real broker.

Each command's ``main(argv)`` is called as the ``odradek`` entry point calls it; stdout and
stderr are captured. Errors must be one line on stderr with a non-zero status, never a traceback.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator

import pytest

from odradek.cli import console_consumer, console_producer, topics
from odradek.cli.main import main as odradek_main
from odradek.testing import BrokerRunner


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("cli-broker"))).start()
    try:
        yield runner
    finally:
        runner.stop()


def run_topics(broker: BrokerRunner, *args: str) -> int:
    return topics.main(["--bootstrap-server", broker.bootstrap_servers, *args])


def produce(broker: BrokerRunner, topic: str, text: str, *args: str) -> int:
    argv = ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic, *args]
    return console_producer.main(argv, stdin=io.StringIO(text))


def consume(broker: BrokerRunner, topic: str, *args: str) -> tuple[int, bytes]:
    out = io.BytesIO()
    argv = ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic, *args]
    status = console_consumer.main(argv, stdout=out)
    return status, out.getvalue()


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_create_list_describe_alter_delete(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run_topics(
            broker,
            "--create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=60000",
            "--config",
            "cleanup.policy=compact",
        )
        == 0
    )
    assert capsys.readouterr().out == "Created topic orders.\n"
    assert run_topics(broker, "--create", "--topic", "payments") == 0
    capsys.readouterr()

    assert run_topics(broker, "--list") == 0
    assert capsys.readouterr().out.split() == ["orders", "payments"]

    assert run_topics(broker, "--describe", "--topic", "orders") == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
        r"Configs: cleanup\.policy=compact,retention\.ms=60000",
        lines[0],
    ), lines[0]
    assert lines[1:] == [f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]

    assert run_topics(broker, "--alter", "--topic", "orders", "--partitions", "5") == 0
    assert run_topics(broker, "--alter", "--topic", "orders", "--config", "retention.ms=1000") == 0
    capsys.readouterr()
    assert run_topics(broker, "--describe", "--topic", "ord.*") == 0
    lines = capsys.readouterr().out.splitlines()
    assert "PartitionCount: 5" in lines[0] and "retention.ms=1000" in lines[0]
    assert len(lines) == 6

    assert run_topics(broker, "--describe") == 0
    described = capsys.readouterr().out
    assert "Topic: payments\t" in described and "Topic: orders\t" in described

    assert run_topics(broker, "--describe", "--topics-with-overrides") == 0
    out = capsys.readouterr().out
    assert "Topic: orders\t" in out and "Topic: payments\t" not in out

    assert run_topics(broker, "--delete", "--topic", "payments") == 0
    capsys.readouterr()
    assert run_topics(broker, "--list") == 0
    assert capsys.readouterr().out.split() == ["orders"]


def describe(runner: BrokerRunner, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert run_topics(runner, "--describe", *args) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out.splitlines()


def test_describe_kafka_layout_and_reports(odradek_broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_topics(odradek_broker, "--create", "--topic", "clicks", "--partitions", "3") == 0
    assert run_topics(odradek_broker, "--create", "--topic", "audit", "--config", "min.insync.replicas=2") == 0
    capsys.readouterr()

    lines = describe(odradek_broker, capsys, "--topic", "clicks")
    assert re.fullmatch(
        r"Topic: clicks\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: ", lines[0]
    ), lines[0]
    assert lines[1:] == [f"\tTopic: clicks\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]
    header = describe(odradek_broker, capsys, "--topic", "audit")[0]
    assert header.endswith("\tConfigs: min.insync.replicas=2"), header

    # a healthy single broker: nothing under-replicated, nothing unavailable
    assert describe(odradek_broker, capsys, "--under-replicated-partitions") == []
    assert describe(odradek_broker, capsys, "--unavailable-partitions") == []
    # min.insync.replicas=2 with one replica: every partition of audit is under it; clicks (1) is at it
    assert describe(odradek_broker, capsys, "--under-min-isr-partitions") == [
        "\tTopic: audit\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"
    ]
    at_min = describe(odradek_broker, capsys, "--at-min-isr-partitions", "--exclude-internal")
    assert at_min == [f"\tTopic: clicks\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]
    # only the topic lines of topics with overrides
    assert describe(odradek_broker, capsys, "--topics-with-overrides") == [header]

    # --topic as Kafka's include list: "," for "|", spaces and quotes dropped
    out = describe(odradek_broker, capsys, "--topic", "'clicks, audit'")
    assert [line for line in out if line.startswith("Topic: ")] == [header, lines[0]]
    internal = describe(odradek_broker, capsys, "--topic", "__consumer_offsets|clicks", "--exclude-internal")
    assert internal == lines

    assert run_topics(odradek_broker, "--describe", "--topic", "([") == 1
    assert one_error_line(capsys.readouterr().err) == "Error while executing topic command : ([ is an invalid regex."
    assert run_topics(odradek_broker, "--describe", "--unavailable-partitions", "--topics-with-overrides") == 2
    assert "can't be used with option" in one_error_line(capsys.readouterr().err)
    assert run_topics(odradek_broker, "--list", "--under-replicated-partitions") == 2
    one_error_line(capsys.readouterr().err)


def test_describe_shows_broker_set_topic_keys_as_kafka(
    odradek_broker_factory: Callable[..., BrokerRunner], capsys: pytest.CaptureFixture[str]
) -> None:
    """A topic key whose broker synonym is set in server.properties is not a default: it prints."""
    runner = odradek_broker_factory(overrides={"log.segment.bytes": "1073741824"})
    assert run_topics(runner, "--create", "--topic", "plain", "--partitions", "2") == 0
    capsys.readouterr()
    lines = describe(runner, capsys, "--topic", "plain")
    assert lines[0].endswith("\tConfigs: segment.bytes=1073741824"), lines[0]
    assert describe(runner, capsys, "--topics-with-overrides") == [lines[0]]


def test_create_errors_and_if_not_exists(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_topics(broker, "--create", "--topic", "dup", "--partitions", "1") == 0
    capsys.readouterr()
    assert run_topics(broker, "--create", "--topic", "dup", "--partitions", "1") == 1
    assert one_error_line(capsys.readouterr().err) == (
        "Error while executing topic command : Topic 'dup' already exists."
    )
    assert run_topics(broker, "--create", "--topic", "dup", "--if-not-exists") == 0
    assert capsys.readouterr().out == ""
    assert run_topics(broker, "--create", "--topic", "bad name") == 1
    assert "illegal" in one_error_line(capsys.readouterr().err)
    assert run_topics(broker, "--create", "--topic", "rf", "--replication-factor", "3") == 1
    assert "Replication factor: 3 larger than available brokers: 1" in one_error_line(capsys.readouterr().err)
    assert run_topics(broker, "--create", "--topic", "cfg", "--config", "retention.ms=never") == 1
    assert "retention.ms" in one_error_line(capsys.readouterr().err)
    assert run_topics(broker, "--create", "--topic", "assigned", "--replica-assignment", "0,0") == 0
    capsys.readouterr()
    assert run_topics(broker, "--describe", "--topic", "assigned") == 0
    assert "PartitionCount: 2" in capsys.readouterr().out


def test_missing_topics_and_if_exists(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    for action in ("--describe", "--delete"):
        assert run_topics(broker, action, "--topic", "no-such-topic") == 1
        assert one_error_line(capsys.readouterr().err) == (
            "Error while executing topic command : Topic 'no-such-topic' does not exist as expected"
        )
        assert run_topics(broker, action, "--topic", "no-such-topic", "--if-exists") == 0
    assert run_topics(broker, "--alter", "--topic", "no-such-topic", "--partitions", "2") == 1
    capsys.readouterr()


def test_usage_errors_and_unreachable_broker(capsys: pytest.CaptureFixture[str]) -> None:
    assert topics.main(["--bootstrap-server", "127.0.0.1:9", "--list", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in one_error_line(capsys.readouterr().err)
    assert topics.main(["--bootstrap-server", "127.0.0.1:9"]) == 2
    one_error_line(capsys.readouterr().err)
    assert topics.main(["--bootstrap-server", "127.0.0.1:9", "--list"]) == 1
    assert one_error_line(capsys.readouterr().err) == (
        "Error while executing topic command : cannot connect to 127.0.0.1:9: connection refused"
    )
    assert topics.main(["--bootstrap-server", "nonsense", "--list"]) == 1
    assert "expected host:port" in one_error_line(capsys.readouterr().err)
    status = console_consumer.main(["--bootstrap-server", "127.0.0.1:9", "--topic", "t"], stdout=io.BytesIO())
    assert status == 1
    assert "connection refused" in one_error_line(capsys.readouterr().err)
    status = console_producer.main(["--bootstrap-server", "127.0.0.1:9", "--topic", "t"], stdin=io.StringIO("x\n"))
    assert status == 1
    assert "connection refused" in one_error_line(capsys.readouterr().err)
    assert topics.main(["--help"]) == 0
    assert "--bootstrap-server" in capsys.readouterr().out


def test_entry_point_dispatches(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert odradek_main(["topics", "--bootstrap-server", broker.bootstrap_servers, "--list"]) == 0
    capsys.readouterr()


def test_console_round_trip_with_keys(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_topics(broker, "--create", "--topic", "keyed", "--partitions", "3") == 0
    lines = "".join(f"user{i % 3}:event {i}\n" for i in range(30))
    assert produce(broker, "keyed", lines, "--property", "parse.key=true", "--property", "key.separator=:") == 0
    status, out = consume(
        broker,
        "keyed",
        "--from-beginning",
        "--max-messages",
        "30",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=|",
    )
    assert status == 0
    assert "Processed a total of 30 messages" in capsys.readouterr().err
    records = [line.split(b"|") for line in out.splitlines()]
    assert sorted(int(v.split()[1]) for _, v in records) == list(range(30))
    # per key, values keep their order (one key, one partition)
    for user in (b"user0", b"user1", b"user2"):
        values = [int(v.split()[1]) for k, v in records if k == user]
        assert values == sorted(values) and len(values) == 10


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "none"])
def test_console_compression(broker: BrokerRunner, codec: str, capsys: pytest.CaptureFixture[str]) -> None:
    topic = f"compressed-{codec}"
    assert run_topics(broker, "--create", "--topic", topic) == 0
    assert produce(broker, topic, "a\nb\n\nc\n", "--compression-codec", codec) == 0
    status, out = consume(broker, topic, "--from-beginning", "--max-messages", "4", "--property", "print.offset=true")
    assert status == 0
    assert out == b"Offset:0\ta\nOffset:1\tb\nOffset:2\t\nOffset:3\tc\n"
    capsys.readouterr()


def test_console_consumer_partition_offset_and_timeout(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_topics(broker, "--create", "--topic", "positions", "--partitions", "2") == 0
    text = "".join(f"{i}\n" for i in range(10))
    assert produce(broker, "positions", text) == 0
    produced_to_0 = consume(broker, "positions", "--partition", "0", "--offset", "earliest", "--timeout-ms", "700")[1]
    capsys.readouterr()
    status, out = consume(
        broker,
        "positions",
        "--partition",
        "0",
        "--offset",
        "2",
        "--timeout-ms",
        "700",
        "--property",
        "print.partition=true",
        "--property",
        "print.timestamp=true",
    )
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == len(produced_to_0.splitlines()) - 2
    assert all(re.fullmatch(rb"CreateTime:\d{13}\tPartition:0\t\d", line) for line in lines), lines
    assert "Processed a total of" in capsys.readouterr().err
    # from the end: nothing until the timeout
    status, out = consume(broker, "positions", "--timeout-ms", "500")
    assert status == 0 and out == b""
    capsys.readouterr()
    # flag errors, as Kafka reports them
    assert consume(broker, "positions", "--offset", "3")[0] == 1
    assert one_error_line(capsys.readouterr().err).endswith("The partition is required when offset is specified.")
    assert consume(broker, "positions", "--partition", "0", "--offset", "1", "--from-beginning")[0] == 1
    one_error_line(capsys.readouterr().err)
    assert consume(broker, "positions", "--partition", "7")[0] == 1
    one_error_line(capsys.readouterr().err)
    assert consume(broker, "no-such-topic", "--from-beginning")[0] == 1
    assert "does not exist" in one_error_line(capsys.readouterr().err)


def test_console_producer_line_errors_and_null_marker(broker: BrokerRunner, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_topics(broker, "--create", "--topic", "lines") == 0
    status = produce(
        broker, "lines", "k:v\nno separator\n", "--property", "parse.key=true", "--property", "key.separator=:"
    )
    assert status == 1
    assert one_error_line(capsys.readouterr().err).endswith("No key separator found on line number 2: 'no separator'")
    status = produce(
        broker,
        "lines",
        "NULL:v1\nk2:NULL\nh1:x,h2:y\tk3:v3\n",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "null.marker=NULL",
    )
    assert status == 0
    status, out = consume(
        broker,
        "lines",
        "--from-beginning",
        "--max-messages",
        "4",
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
    )
    assert status == 0
    assert out.splitlines() == [
        b"NO_HEADERS\tk\tv",
        b"NO_HEADERS\tnull\tv1",
        b"NO_HEADERS\tk2\tnull",
        b"NO_HEADERS\th1\tx,h2:y\tk3:v3",
    ]
    capsys.readouterr()
    status = produce(
        broker,
        "lines",
        "h1:x,h2:y\tk4:v4\n",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "parse.headers=true",
    )
    assert status == 0
    status, out = consume(
        broker,
        "lines",
        "--partition",
        "0",
        "--offset",
        "4",
        "--max-messages",
        "1",
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
    )
    assert out == b"h1:x,h2:y\tk4\tv4\n"
    capsys.readouterr()
