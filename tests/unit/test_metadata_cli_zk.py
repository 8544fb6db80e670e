"""``odradek zk --data-dir``: ls, get and tree over a broker's embedded metadata snapshot."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.cli.zk import main
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.snapshot import METADATA_DIR_NAME
from odradek.metadata.znodes import BrokerInfo


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A broker data dir whose embedded store holds one topic and one (ephemeral) broker."""

    async def populate() -> None:
        store = EmbeddedStore(tmp_path / METADATA_DIR_NAME)
        zk = KafkaZkClient(store.session())
        await zk.create_top_level_paths()
        await zk.store.create("/brokers/topics/t", b'{"version":1,"partitions":{"0":[0]}}')
        await zk.register_broker(BrokerInfo(id=0, host="h", port=9092))
        await store.close()

    asyncio.run(populate())
    return tmp_path


def test_ls(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(data_dir), "ls", "/brokers"]) == 0
    assert capsys.readouterr().out.splitlines() == ["ids", "seqid", "topics"]
    assert main(["--data-dir", str(data_dir), "ls", "/brokers/ids"]) == 0  # ephemeral: not persisted
    assert capsys.readouterr().out == ""


def test_get_with_stat(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(data_dir), "get", "-s", "/brokers/topics/t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == '{"version":1,"partitions":{"0":[0]}}'
    assert "dataVersion = 0" in lines and "ephemeralOwner = 0x0" in lines and "numChildren = 0" in lines


def test_tree(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(data_dir), "tree", "/brokers"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "/brokers",
        "  ids",
        "  seqid",
        "  topics",
        '    t = {"version":1,"partitions":{"0":[0]}}',
    ]
    assert main(["--data-dir", str(data_dir / METADATA_DIR_NAME), "tree"]) == 0  # the metadata dir works too
    assert capsys.readouterr().out.startswith("/\n  admin\n    delete_topics\n")


def test_missing_path_is_one_clear_line(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(data_dir), "get", "/x"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "No node exists at /x\n" and captured.out == ""
    assert main(["--data-dir", str(data_dir), "tree", "/x/y"]) == 1
    assert capsys.readouterr().err == "No node exists at /x/y\n"


def test_missing_store_and_bad_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path), "ls", "/"]) == 1
    assert "No embedded metadata store in" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "ls", "brokers"]) == 2
    assert "absolute path" in capsys.readouterr().err


def test_a_source_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["ls", "/"])
    assert info.value.code == 2
