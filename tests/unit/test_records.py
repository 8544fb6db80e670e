"""RecordBatch v2 codec: layout, validation, stamping, compression round trips, malformed input."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.errors import CorruptRecordError, InvalidRecordError, KafkaError
from odradek.protocol import records_compression as codecs
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORDS_COUNT_OFFSET,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_all_records,
    iter_batches,
    set_log_append_time,
    stamp_base_offset,
    valid_prefix_length,
    validate_batches,
)


def sample_records(n: int = 5) -> list[Record]:
    out = [
        Record(
            f"key-{i}".encode(), f"value-{i}".encode() * (i + 1), [("h1", b"a"), ("h2", None)], 1_700_000_000_000 + i
        )
        for i in range(n)
    ]
    out.append(Record(None, None, (), 1_699_999_999_000))  # null key/value, earlier timestamp
    out.append(Record(b"", b"", [("empty", b"")], None))
    return out


def recrc(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC of the batch at ``pos`` after a test edits a covered field."""
    (length,) = struct.unpack_from(">i", buf, pos + BATCH_LENGTH_OFFSET)
    crc = crc32c(bytes(buf[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length]))
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)


def test_header_layout_and_properties() -> None:
    raw = build_batch(
        sample_records(3),
        base_offset=42,
        timestamp_ms=1_700_000_000_500,
        producer_id=7,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    h = BatchHeader.parse(raw)
    assert BATCH_HEADER_SIZE == 61 and LOG_OVERHEAD == 12
    assert h.base_offset == 42 == struct.unpack_from(">q", raw, BASE_OFFSET_OFFSET)[0]
    assert h.batch_length == len(raw) - 12
    assert h.partition_leader_epoch == 9
    assert h.magic == 2 == raw[MAGIC_OFFSET]
    assert h.records_count == 5 == struct.unpack_from(">i", raw, RECORDS_COUNT_OFFSET)[0]
    assert h.last_offset_delta == 4 and h.last_offset == 46 and h.next_offset == 47
    assert h.size_in_bytes == len(raw)
    assert h.is_transactional and not h.is_control
    assert h.compression == 0 and h.compression_name == "none"
    assert h.timestamp_type == 0
    assert h.base_timestamp == 1_700_000_000_000
    assert h.max_timestamp == 1_700_000_000_500  # the record without a timestamp gets timestamp_ms
    assert h.producer_id == 7 and h.producer_epoch == 3
    assert h.base_sequence == 10 and h.last_sequence == 14
    assert h.crc == crc32c(raw[ATTRIBUTES_OFFSET:])


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_round_trips(compression: int) -> None:
    records = sample_records(50)
    raw = build_batch(records, base_offset=1000, compression=compression, timestamp_ms=1_700_000_000_999)
    (h,) = validate_batches(raw)
    assert h.compression == compression
    decoded = decode_records(raw)
    assert [d.offset for d in decoded] == list(range(1000, 1000 + len(records)))
    for rec, dec in zip(records, decoded, strict=True):
        assert dec.key == rec.key
        assert dec.value == rec.value
        assert dec.headers == list(rec.headers)
        assert dec.timestamp_ms == (rec.timestamp_ms if rec.timestamp_ms is not None else 1_700_000_000_999)


@pytest.mark.parametrize("size", [0, 1, 70_000, 300_000])
@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_codecs_round_trip_large_and_empty(compression: int, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert codecs.decompress(compression, codecs.compress(compression, data)) == data


def test_snappy_raw_and_xerial_both_decode() -> None:
    data = b"snappy data " * 5000
    raw_block = bytes(cramjam.snappy.compress_raw(data))
    xerial = codecs.compress(codecs.SNAPPY, data)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert codecs.decompress(codecs.SNAPPY, raw_block) == data
    assert codecs.decompress(codecs.SNAPPY, xerial) == data


def test_lz4_frame_is_standard_and_independent() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = b"lz4 frame " * 20000
    ours = codecs.compress(codecs.LZ4, data)
    assert ours[:4] == b"\x04\x22\x4d\x18"
    assert ours[4] & 0x20  # block independence: Java's reader decompresses blocks one by one
    assert lz4_frame.decompress(ours) == data
    assert codecs.decompress(codecs.LZ4, lz4_frame.compress(data)) == data


def test_interoperates_with_kafka_python() -> None:
    default_records = pytest.importorskip("kafka.record.default_records")
    memory_records = pytest.importorskip("kafka.record.memory_records")
    for compression in range(5):
        builder = default_records.DefaultRecordBatchBuilder(
            magic=2,
            compression_type=compression,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(4):
            builder.append(i, timestamp=1000 + i, key=b"k", value=b"v" * i, headers=[("x", b"y")])
        theirs = bytes(builder.build())
        validate_batches(theirs)
        assert [r.value for r in decode_records(theirs)] == [b"v" * i for i in range(4)]
        ours = build_batch(sample_records(3), compression=compression)
        batch = memory_records.MemoryRecords(ours).next_batch()
        assert batch.validate_crc()
        assert [r.key for r in batch] == [r.key for r in sample_records(3)]


def test_crc_flip_is_detected_everywhere_it_covers() -> None:
    raw = build_batch(sample_records(3))
    for pos in range(ATTRIBUTES_OFFSET, len(raw)):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            validate_batches(bad)
        assert valid_prefix_length(bad)[0] == 0
    for pos in list(range(0, 8)) + list(range(PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET)):
        other = bytearray(raw)
        other[pos] ^= 0xFF
        validate_batches(other)  # base offset and leader epoch are outside the CRC


def test_validate_reports_magic_length_and_counts() -> None:
    raw = bytearray(build_batch(sample_records(2)))
    bad = bytearray(raw)
    bad[MAGIC_OFFSET] = 1
    with pytest.raises(InvalidRecordError, match="magic 1"):
        validate_batches(bad)
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batches(raw + raw[:30])
    with pytest.raises(CorruptRecordError, match="declares"):
        validate_batches(raw + raw[:-1])
    short = bytearray(raw)
    struct.pack_into(">i", short, BATCH_LENGTH_OFFSET, 20)
    with pytest.raises(CorruptRecordError, match="less than the minimum 49"):
        validate_batches(short)
    inconsistent = bytearray(raw)
    struct.pack_into(">i", inconsistent, LAST_OFFSET_DELTA_OFFSET, 7)
    recrc(inconsistent)
    with pytest.raises(InvalidRecordError, match="inconsistent"):
        validate_batches(inconsistent)
    negative = bytearray(raw)
    struct.pack_into(">i", negative, RECORDS_COUNT_OFFSET, -3)
    recrc(negative)
    with pytest.raises(InvalidRecordError, match="negative records count"):
        validate_batches(negative)
    codec = bytearray(raw)
    struct.pack_into(">h", codec, ATTRIBUTES_OFFSET, 6)
    recrc(codec)
    with pytest.raises(InvalidRecordError, match="unknown compression codec 6"):
        validate_batches(codec)
    assert validate_batches(b"") == []
    assert len(validate_batches(memoryview(raw + raw + raw))) == 3


def test_stamp_base_offset_keeps_crc_valid() -> None:
    buf = bytearray(build_batch(sample_records(2)) * 2)
    size = BatchHeader.parse(buf).size_in_bytes
    stamp_base_offset(buf, 0, 100, 5)
    stamp_base_offset(memoryview(buf), size, 104)
    first, second = validate_batches(buf)
    assert (first.base_offset, first.partition_leader_epoch) == (100, 5)
    assert (second.base_offset, second.partition_leader_epoch) == (104, -1)
    assert decode_records(buf)[0].offset == 100


def test_set_log_append_time() -> None:
    buf = bytearray(build_batch(sample_records(3)))
    set_log_append_time(buf, 0, 1_800_000_000_000)
    (h,) = validate_batches(buf)
    assert h.timestamp_type == LOG_APPEND_TIME
    assert struct.unpack_from(">q", buf, MAX_TIMESTAMP_OFFSET)[0] == 1_800_000_000_000
    assert {r.timestamp_ms for r in decode_records(buf)} == {1_800_000_000_000}


def test_iter_batches_and_valid_prefix() -> None:
    one = build_batch(sample_records(1))
    two = build_batch(sample_records(2), base_offset=3)
    assert [(p, h.base_offset) for p, h in iter_batches(one + two + two[:20])] == [(0, 0), (len(one), 3)]
    assert valid_prefix_length(one + two) == (len(one) + len(two), None)
    length, reason = valid_prefix_length(one + two[:-3])
    assert length == len(one) and reason is not None and "remain" in reason
    bad = bytearray(one + two)
    bad[-1] ^= 0xFF
    length, reason = valid_prefix_length(bad)
    assert length == len(one) and reason is not None and reason.startswith("CRC mismatch")
    assert [r.offset for r in iter_all_records(one + two + b"\x00" * 5)] == list(range(7))


def test_empty_and_control_batches() -> None:
    empty = build_batch([], base_offset=5, timestamp_ms=123)
    (h,) = validate_batches(empty)
    assert h.records_count == 0 and decode_records(empty) == []
    control = build_batch([Record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")], is_control=True)
    assert BatchHeader.parse(control).is_control


def test_negative_timestamp_deltas_and_large_values() -> None:
    recs = [Record(b"a", b"1", timestamp_ms=2**40), Record(b"b", b"2", timestamp_ms=5), Record(b"c", b"x" * 70000)]
    decoded = decode_records(build_batch(recs, timestamp_ms=2**41))
    assert [d.timestamp_ms for d in decoded] == [2**40, 5, 2**41]
    assert decoded[2].value == b"x" * 70000


def test_decode_errors_are_kafka_errors() -> None:
    raw = build_batch(sample_records(2))
    with pytest.raises(CorruptRecordError):
        decode_records(raw[:40])
    with pytest.raises(CorruptRecordError):
        decode_records(raw[:-1])
    bad = bytearray(raw)
    bad[-2] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(bad)
    garbled = bytearray(raw)
    garbled[BATCH_HEADER_SIZE] = 0x7F  # first record's length varint
    recrc(garbled)
    with pytest.raises(CorruptRecordError):
        decode_records(garbled)
    gz = bytearray(build_batch(sample_records(2), compression=1))
    gz[BATCH_HEADER_SIZE + 12] ^= 0xFF
    recrc(gz)
    with pytest.raises(CorruptRecordError):
        decode_records(gz)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_garbled_records_section_raises_only_kafka_errors(data: st.DataObject) -> None:
    compression = data.draw(st.sampled_from([0, 1, 2, 3, 4]))
    buf = bytearray(build_batch(sample_records(3), compression=compression, timestamp_ms=1_700_000_000_000))
    n_flips = data.draw(st.integers(1, 6))
    for _ in range(n_flips):
        pos = data.draw(st.integers(BATCH_HEADER_SIZE - 4, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    recrc(buf)
    try:
        decode_records(buf)
    except KafkaError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_leak_python_errors(blob: bytes) -> None:
    for fn in (validate_batches, decode_records):
        try:
            fn(blob)
        except KafkaError:
            pass
    list(iter_batches(blob))
    valid_prefix_length(blob)


def test_a_stored_batch_may_hold_fewer_records_than_offsets() -> None:
    """A batch the cleaner rewrote keeps its offsets with fewer records: a producer may not send
    one, replication and recovery keep it; more records than offsets is invalid everywhere."""
    cleaned = bytearray(build_batch(sample_records(2)))
    struct.pack_into(">i", cleaned, LAST_OFFSET_DELTA_OFFSET, 7)  # 2 records over offsets 0..7
    recrc(cleaned)
    with pytest.raises(InvalidRecordError, match="inconsistent"):
        validate_batches(cleaned)
    assert [h.last_offset_delta for h in validate_batches(cleaned, stored=True)] == [7]
    assert valid_prefix_length(cleaned) == (len(cleaned), None)
    overfull = bytearray(build_batch(sample_records(3)))
    struct.pack_into(">i", overfull, LAST_OFFSET_DELTA_OFFSET, 1)
    recrc(overfull)
    with pytest.raises(InvalidRecordError, match="inconsistent"):
        validate_batches(overfull, stored=True)
    assert valid_prefix_length(overfull)[0] == 0
