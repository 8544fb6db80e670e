"""Garbage appended to a log: only KafkaError subclasses come out and the log is left unchanged."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.errors import KafkaError
from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.storage import Log, LogConfig

GOOD = build_batch([Record(b"k", b"value", timestamp_ms=1_700_000_000_000)] * 3)
CFG = LogConfig.from_props({"segment.bytes": "600", "index.interval.bytes": "50", "max.message.bytes": "4000"})


def snapshot(log: Log) -> tuple[int, int, int, list[tuple[str, bytes]]]:
    files = sorted((p.name, p.read_bytes()) for p in log.dir.glob("*.log"))
    return log.log_end_offset, log.log_start_offset, log.num_segments, files


def mutate(data: st.DataObject, raw: bytes, fix_crc: bool) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        buf = buf[: data.draw(st.integers(0, len(buf)))]
    if fix_crc and len(buf) >= 61:
        (length,) = struct.unpack_from(">i", buf, 8)
        end = 12 + length
        if 21 <= end <= len(buf):
            struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:end])))
    return bytes(buf)


payloads = st.one_of(
    st.binary(max_size=400),
    st.builds(lambda n: GOOD * n, st.integers(1, 3)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_garbage_appends_raise_kafka_errors_and_change_nothing(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Log(Path(tmp) / "fuzz-0", CFG)
        log.append_as_leader(GOOD)
        for _ in range(data.draw(st.integers(1, 4))):
            base = data.draw(payloads)
            payload = mutate(data, base, data.draw(st.booleans())) if base and data.draw(st.booleans()) else base
            before = snapshot(log)
            as_follower = data.draw(st.booleans())
            try:
                if as_follower:
                    log.append_as_follower(payload)
                else:
                    log.append_as_leader(payload, leader_epoch=3)
            except KafkaError:
                assert snapshot(log) == before
            else:
                assert log.log_end_offset >= before[0]
        # whatever happened, the log still reads back completely and reopens identically
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            chunk = log.read(offset, 10_000).records_bytes()
            assert chunk
            offset = _next_offset(chunk)
        state = snapshot(log)
        log.close()
        reopened = Log(Path(tmp) / "fuzz-0", CFG)
        assert snapshot(reopened) == state
        reopened.close()


def _next_offset(data: bytes) -> int:
    last = -1
    for _, h in iter_batches(data):
        last = h.last_offset
    return last + 1
