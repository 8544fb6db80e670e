"""Compression codecs of record batches (attributes bits 0-2), sans-IO.

The records section of a v2 batch (everything after the 61-byte header) is compressed as one
block with the batch's codec. Formats, as Kafka's clients write them:

* ``gzip`` (1): a gzip stream (RFC 1952); several concatenated members are accepted.
* ``snappy`` (2): Java clients use the xerial framing: the 8-byte magic ``\\x82SNAPPY\\x00``, two
  big-endian int32 (version 1, compatible version 1), then blocks of ``[int32 length][raw snappy
  block]``. librdkafka may send one raw snappy block. Both are decoded; the encoder writes xerial
  framing with 32 KiB blocks, which every client reads.
* ``lz4`` (3): the LZ4 frame format. Java's reader decompresses each block on its own, so the
  encoder writes independent 64 KiB blocks with no checksums (only the mandatory header checksum,
  an xxHash32 over the frame descriptor); the decoder accepts any valid frame.
* ``zstd`` (4): a zstd frame, with or without the content size.

Every failure to decode raises :class:`~odradek.errors.CorruptRecordError`; an unknown codec id
raises :class:`~odradek.errors.InvalidRecordError`. :func:`decompress_bounded` stops at a given
output size (RecordTooLargeError), for input the broker has not produced itself. Pure functions: safe from any thread.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "codec_name",
    "compress",
    "decompress",
    "decompress_bounded",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_LZ4_MAGIC = struct.pack("<I", 0x184D2204)
_LZ4_BLOCK = 64 * 1024
# FLG: version 01, block independence; no block checksum, no content size, no content checksum.
# BD: maximum block size 64 KiB (code 4).
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")
_MAX_SNAPPY_BLOCK = 1 << 30

_M32 = 0xFFFFFFFF
_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393


def codec_name(codec: int) -> str:
    """Kafka's name of a codec id (``none``, ``gzip``, ...), or ``unknown(<id>)``."""
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_small(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (the LZ4 frame descriptor); pure Python, a few µs."""
    if len(data) >= 16:
        raise ValueError("xxh32_small handles inputs shorter than 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, i)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < len(data):
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_HEADER = _LZ4_MAGIC + bytes((_LZ4_FLG, _LZ4_BD, (xxh32_small(bytes((_LZ4_FLG, _LZ4_BD))) >> 8) & 0xFF))


def _lz4_frame(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_LZ4_HEADER)
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out += _UINT32_LE.pack(len(chunk) | 0x80000000)
            out += chunk
        else:
            out += _UINT32_LE.pack(len(block))
            out += block
    out += b"\x00\x00\x00\x00"
    return bytes(out)


def _xerial_encode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, max(len(view), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        if cramjam.snappy.decompress_raw_len(view) > _MAX_SNAPPY_BLOCK:
            raise CorruptRecordError("snappy block declares an implausible uncompressed size")
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < 16:
        raise CorruptRecordError("xerial snappy stream shorter than its 16-byte header")
    out = bytearray()
    pos = 16
    while pos < len(view):
        if len(view) - pos < 4:
            raise CorruptRecordError(f"xerial snappy block length truncated at byte {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > len(view) - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at byte {pos} exceeds the data")
        block = view[pos : pos + length]
        if cramjam.snappy.decompress_raw_len(block) > _MAX_SNAPPY_BLOCK:
            raise CorruptRecordError("snappy block declares an implausible uncompressed size")
        out += cramjam.snappy.decompress_raw(block)
        pos += length
    return bytes(out)


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` with ``codec`` (0 returns it unchanged)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        return _lz4_frame(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise InvalidRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress ``data`` written with ``codec``.

    Raises CorruptRecordError when the data does not decode, InvalidRecordError for an unknown codec.
    """
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decode(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises DecompressionError, ValueError, ...
        raise CorruptRecordError(f"failed to decompress {codec_name(codec)} records: {exc}") from exc
    raise InvalidRecordError(f"unknown compression codec {codec}")


_OVERFLOW = "failed to write whole buffer"  # cramjam's error when the output buffer is full


def _snappy_size(view: memoryview) -> int:
    """Uncompressed size a snappy payload (raw or xerial) declares, without decompressing it."""
    if bytes(view[:8]) != XERIAL_MAGIC:
        return int(cramjam.snappy.decompress_raw_len(view))
    total, pos = 0, 16
    while pos + 4 <= len(view):
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > len(view) - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at byte {pos} exceeds the data")
        total += int(cramjam.snappy.decompress_raw_len(view[pos : pos + length]))
        pos += length
    return total


def decompress_bounded(codec: int, data: bytes | bytearray | memoryview, max_bytes: int) -> memoryview:
    """Decompress ``data`` written with ``codec``, producing at most ``max_bytes`` bytes.

    Output goes into a buffer that starts at ``max(64 KiB, 8 x len(data))`` and grows by four
    times up to ``max_bytes`` while it overflows, so memory follows the real output, and
    decompression stops as soon as the limit is passed: a small payload that expands without
    bound costs at most ``max_bytes`` of memory and the time to produce them. Snappy payloads are
    checked against the sizes they declare before any output is produced.

    Raises RecordTooLargeError past ``max_bytes``, CorruptRecordError when the data does not
    decode, InvalidRecordError for an unknown codec.
    """
    view = memoryview(data).cast("B")
    if codec == NONE:
        if view.nbytes > max_bytes:
            raise RecordTooLargeError(f"records of {view.nbytes} bytes exceed the limit of {max_bytes} bytes")
        return view
    if codec == SNAPPY:
        try:
            declared = _snappy_size(view)
        except CorruptRecordError:
            raise
        except Exception as exc:
            raise CorruptRecordError(f"failed to decompress snappy records: {exc}") from exc
        if declared > max_bytes:
            raise RecordTooLargeError(
                f"snappy records declare {declared} bytes uncompressed, more than the limit of {max_bytes} bytes"
            )
        return memoryview(decompress(SNAPPY, view))
    into = {GZIP: cramjam.gzip.decompress_into, LZ4: cramjam.lz4.decompress_into, ZSTD: cramjam.zstd.decompress_into}
    if codec not in into:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    size = min(max_bytes, max(64 * 1024, 8 * view.nbytes))
    while True:
        out = bytearray(size)
        try:
            written = int(into[codec](view, out))
        except Exception as exc:  # cramjam's DecompressionError
            if _OVERFLOW not in str(exc):
                raise CorruptRecordError(f"failed to decompress {codec_name(codec)} records: {exc}") from exc
            if size >= max_bytes:
                raise RecordTooLargeError(
                    f"{codec_name(codec)} records decompress to more than the limit of {max_bytes} bytes"
                ) from None
            size = min(max_bytes, size * 4)
            continue
        return memoryview(out)[:written]
