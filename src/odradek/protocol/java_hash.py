"""Java's ``String.hashCode``, which Kafka uses to place groups and transactional ids on partitions
and the old consumer's round-robin assignor to order partitions. Pure: safe anywhere.

The hash walks the string in Python (about 0.1 us a character), so the last 4,096 are cached: the
coordinators hash every group id again on each partition load or unload, and a group id may be
32,767 characters long."""

from __future__ import annotations

import functools

__all__ = ["java_string_hash", "key_partition"]


@functools.lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_partition(key: str, partitions: int) -> int:
    """The partition of a group or transactional id in its internal topic: Kafka's
    ``Utils.abs(key.hashCode) % partitions`` (``Utils.abs`` maps MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
