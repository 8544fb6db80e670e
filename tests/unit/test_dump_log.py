"""odradek dump-log: Kafka-style output and index verification."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.cli.dump_log import main
from odradek.protocol.records import Record, build_batch
from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import CleanerConfig, clean_log
from odradek.storage.dump import dump_files


def make_segment(tmp_path: Path) -> Path:
    log = Log(tmp_path / "orders-0", LogConfig.from_props({"index.interval.bytes": "100"}))
    for i in range(6):
        records = [Record(b"key%d" % i, b"value-%d" % i * 10, [("h", b"1")], 1_700_000_000_000 + i)] * 3
        log.append_as_leader(build_batch(records, compression=i % 5), leader_epoch=2)
    log.close()
    return tmp_path / "orders-0" / "00000000000000000000"


def test_log_batches_are_printed_like_kafka(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    assert main(["--files", f"{base}.log"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Dumping {base}.log"
    assert out[1] == "Log starting offset: 0"
    assert len(out) == 8
    first = out[2]
    assert first.startswith(
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 2 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 "
        "CreateTime: 1700000000000 size: "
    )
    assert " magic: 2 compresscodec: none crc: " in first and first.endswith(" isvalid: true")
    assert "compresscodec: gzip" in out[3] and "compresscodec: zstd" in out[6]
    assert "baseOffset: 15 lastOffset: 17" in out[7]


def test_deep_iteration_and_print_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    assert main(["--files", f"{base}.log", "--print-data-log"]) == 0
    out = capsys.readouterr().out.splitlines()
    records = [line for line in out if line.startswith("| ")]
    assert len(records) == 18
    assert records[0] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 70 sequence: -1 headerKeys: [h] "
        "key: key0 payload: " + "value-0" * 10
    )
    assert main(["--files", f"{base}.log", "--deep-iteration"]) == 0
    deep = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(deep) == 18 and "payload" not in deep[0]


def test_index_and_time_index_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    assert main(["--files", f"{base}.index,{base}.timeindex"]) == 0
    out = capsys.readouterr().out.splitlines()
    index_lines = [line for line in out if line.startswith("offset: ")]
    time_lines = [line for line in out if line.startswith("timestamp: ")]
    assert index_lines and time_lines
    entries = struct.iter_unpack(">ii", Path(f"{base}.index").read_bytes())
    assert index_lines == [f"offset: {rel} position: {pos}" for rel, pos in entries]
    assert time_lines[-1] == "timestamp: 1700000000005 offset: 17"


def test_verify_index_only_detects_a_broken_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    assert main(["--files", f"{base}.index", "--verify-index-only"]) == 0
    captured = capsys.readouterr()
    assert "offset: " not in captured.out and captured.err == ""
    index = Path(f"{base}.index")
    data = bytearray(index.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 0)
    struct.pack_into(">ii", data, 0, rel + 1, pos)  # names the wrong offset for that batch
    index.write_bytes(bytes(data))
    assert main(["--files", f"{base}.index", "--verify-index-only"]) == 1
    err = capsys.readouterr().err
    assert f"Mismatches in :{index.resolve()}" in err
    assert f"  Index offset: {rel + 1}, log offset: {rel}" in err


def test_sanity_check_and_bad_time_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    assert main(["--files", f"{base}.index", "--index-sanity-check"]) == 0
    assert "passed sanity check" in capsys.readouterr().out
    tindex = Path(f"{base}.timeindex")
    data = bytearray(tindex.read_bytes())
    ts, rel = struct.unpack_from(">qi", data, 0)
    struct.pack_into(">qi", data, 0, ts - 7, rel)
    tindex.write_bytes(bytes(data))
    assert main(["--files", str(tindex), "--verify-index-only"]) == 1
    assert "Found timestamp mismatch" in capsys.readouterr().err


def test_corrupt_log_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_segment(tmp_path)
    log_file = Path(f"{base}.log")
    data = bytearray(log_file.read_bytes())
    data[100] ^= 0xFF
    log_file.write_bytes(bytes(data) + b"\x00\x01\x02")
    assert main(["--files", str(log_file)]) == 1
    out = capsys.readouterr().out
    assert "isvalid: false" in out
    assert "Found 3 invalid bytes at the end of 00000000000000000000.log" in out


def test_usage_errors_and_unknown_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert main(["--files", str(other)]) == 0
    assert "Ignoring unknown file" in capsys.readouterr().err
    result = dump_files([tmp_path / "missing.log"])
    assert result.failed and "does not exist" in result.errors[0]


def test_a_cleaned_segment_shows_gaps_and_delete_horizons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = LogConfig.from_props({"cleanup.policy": "compact", "delete.retention.ms": "1000"})
    log = Log(tmp_path / "table-0", config, time_ms=lambda: 1_700_000_000_000)
    for i in range(4):
        log.append_as_leader(build_batch([Record(b"k%d" % k, b"v%d" % i) for k in range(3)]))
    log.append_as_leader(build_batch([Record(b"k1", None)]))  # a tombstone
    log.roll()
    log.high_watermark = log.log_end_offset
    clean_log(log, now_ms=1_700_000_000_000, config=CleanerConfig())
    log.close()
    segment = tmp_path / "table-0" / "00000000000000000000.log"
    assert main(["--files", str(segment), "--deep-iteration"]) == 0
    captured = capsys.readouterr()
    records = [line.split()[2] for line in captured.out.splitlines() if line.startswith("| offset: ")]
    assert records == ["9", "11", "12"]  # k0 and k2 of the last round, then k1's tombstone
    horizons = [
        line.split("deleteHorizonMs: ")[1].split()[0] for line in captured.out.splitlines() if "Horizon" in line
    ]
    assert horizons[-1] == "OptionalLong[1700000001000]"  # now + delete.retention.ms, on the tombstone's batch
    assert f"Non-consecutive offsets in {segment.resolve()}" in captured.err
