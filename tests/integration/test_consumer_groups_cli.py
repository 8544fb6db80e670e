"""``odradek consumer-groups``: Kafka's columns, lag, members, state, delete and offset resets."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.cli.consumer_groups import main
from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, wait_until

HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]


def cli(capsys: Any, broker: BrokerRunner, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--bootstrap-server", broker.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.strip().splitlines() if line.strip()]
    return lines


def _member(broker: BrokerRunner, group: str, topic: str, client_id: str = "lagger") -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    wait_until(lambda: consumer.poll(0.05) is not None or len(consumer.assignment()) > 0, 20, "assignment")
    return consumer


def test_describe_shows_lag_while_consumer_is_behind(odradek_broker: BrokerRunner, capsys: Any) -> None:
    create_topic(odradek_broker.bootstrap_servers, "laggy", 2)
    produce(odradek_broker.bootstrap_servers, "laggy", 50, partitions=2)
    consumer = _member(odradek_broker, "lag-group", "laggy")
    try:
        consumer.commit(offsets=[TopicPartition("laggy", 0, 10), TopicPartition("laggy", 1, 25)], asynchronous=False)
        code, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "lag-group")
        assert code == 0
        table = rows(out)
        assert table[0] == HEADER
        by_partition = {r[2]: r for r in table[1:]}
        member_id = by_partition["0"][6]
        assert member_id.startswith("lagger-")
        assert by_partition["0"] == ["lag-group", "laggy", "0", "10", "50", "40", member_id, "/127.0.0.1", "lagger"]
        assert by_partition["1"] == ["lag-group", "laggy", "1", "25", "50", "25", member_id, "/127.0.0.1", "lagger"]
        produce(odradek_broker.bootstrap_servers, "laggy", 5, partitions=2)
        _, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "lag-group")
        assert [r[3:6] for r in rows(out)[1:]] == [["10", "55", "45"], ["25", "55", "30"]]
        # the columns line up as Kafka's printf does
        lines = out.strip().splitlines()
        assert len({line.index("CURRENT-OFFSET") for line in lines[:1]}) == 1
        assert all(line[lines[0].index("PARTITION")] in "P01" for line in lines)
    finally:
        consumer.close()
    code, out, err = cli(capsys, odradek_broker, "--describe", "--group", "lag-group")
    assert "Consumer group 'lag-group' has no active members." in err
    assert [r[6:] for r in rows(out)[1:]] == [["-", "-", "-"], ["-", "-", "-"]]


def test_list_members_state_and_delete(odradek_broker: BrokerRunner, capsys: Any) -> None:
    create_topic(odradek_broker.bootstrap_servers, "listed", 3)
    consumer = _member(odradek_broker, "listed-group", "listed", client_id="lister")
    try:
        wait_until(lambda: "Stable" in cli(capsys, odradek_broker, "--list", "--state")[1], 10, "Stable")
        code, out, _ = cli(capsys, odradek_broker, "--list")
        assert code == 0 and "listed-group" in out.split()
        _, out, _ = cli(capsys, odradek_broker, "--list", "--state", "empty")
        assert "listed-group" not in out
        code, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "listed-group", "--members", "--verbose")
        table = rows(out)
        assert table[0] == [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]
        assert table[1][2:] == ["-", "/127.0.0.1", "lister", "3", "listed(0,1,2)"]
        code, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "listed-group", "--state")
        table = rows(out)
        assert out.splitlines()[1].split("  ")[0] == "GROUP"
        assert table[1][0] == "listed-group" and table[1][-3:] == ["range", "Stable", "1"]
        code, out, _ = cli(capsys, odradek_broker, "--delete", "--group", "listed-group")
        assert code == 1 and "NON_EMPTY_GROUP" in out
    finally:
        consumer.close()
    code, out, _ = cli(capsys, odradek_broker, "--delete", "--group", "listed-group")
    assert code == 0 and out.strip() == "Deletion of requested consumer groups ('listed-group') was successful."
    code, out, err = cli(capsys, odradek_broker, "--describe", "--group", "listed-group")
    assert code == 1 and "Consumer group 'listed-group' does not exist." in err


def test_reset_offsets(odradek_broker: BrokerRunner, capsys: Any) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "resets", 2)
    produce(b, "resets", 20, partitions=2)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(b, "resets", 20, partitions=2)
    consumer = _member(odradek_broker, "resetters", "resets")
    consumer.commit(offsets=[TopicPartition("resets", 0, 5), TopicPartition("resets", 1, 7)], asynchronous=False)
    code, _, err = cli(
        capsys, odradek_broker, "--reset-offsets", "--group", "resetters", "--all-topics", "--to-earliest"
    )
    assert code == 1 and "inactive" in err and "Stable" in err
    consumer.close()

    def reset(*args: str) -> dict[str, str]:
        code, out, err = cli(capsys, odradek_broker, "--reset-offsets", "--group", "resetters", *args)
        assert code == 0, err
        table = rows(out)
        assert table[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        return {r[2]: r[3] for r in table[1:]}

    def committed() -> dict[str, str]:
        _, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "resetters")
        return {r[2]: r[3] for r in rows(out)[1:]}

    assert reset("--topic", "resets", "--to-earliest") == {"0": "0", "1": "0"}
    assert committed() == {"0": "5", "1": "7"}  # dry run: nothing changed
    assert reset("--topic", "resets", "--to-latest", "--execute") == {"0": "40", "1": "40"}
    assert committed() == {"0": "40", "1": "40"}
    assert reset("--topic", "resets:1", "--shift-by", "-15", "--execute") == {"1": "25"}
    assert reset("--all-topics", "--to-offset", "1000", "--execute") == {"0": "40", "1": "40"}
    assert reset("--topic", "resets:0", "--to-offset", "3", "--execute") == {"0": "3"}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(middle / 1000)) + f".{middle % 1000:03d}"
    assert reset("--topic", "resets", "--to-datetime", stamp, "--execute") == {"0": "20", "1": "20"}
    assert committed() == {"0": "20", "1": "20"}
    restarted = Consumer({"bootstrap.servers": b, "group.id": "resetters", "enable.auto.commit": False})
    restarted.subscribe(["resets"])
    first: list[int] = []
    wait_until(
        lambda: (m := restarted.poll(0.1)) is not None and not m.error() and not first.append(m.offset()),
        20,
        "a record",
    )
    restarted.close()
    assert first == [20]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer_group(odradek_broker: BrokerRunner, capsys: Any) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "kcat-groups", 3)
    produce(b, "kcat-groups", 10, partitions=3)
    result = subprocess.run(
        ["kcat", "-b", b, "-G", "kcat-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "kcat-groups"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split()) == 30
    code, out, _ = cli(capsys, odradek_broker, "--describe", "--group", "kcat-group")
    assert code == 0
    assert sorted((r[2], r[3], r[5]) for r in rows(out)[1:]) == [("0", "10", "0"), ("1", "10", "0"), ("2", "10", "0")]
