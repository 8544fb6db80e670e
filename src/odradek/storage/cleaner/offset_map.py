"""The cleaner's key -> latest offset map (Kafka's ``OffsetMap``/``SkimpyOffsetMap``).

Kafka hashes keys with MD5 into a fixed array; here the map is a Python ``dict`` whose keys are the
records' key bytes, so keys are compared byte for byte (no hash collisions can make the cleaner
drop a live record). Its size is bounded by a byte budget, ``log.cleaner.dedupe.buffer.size``
divided among the ``log.cleaner.threads`` times ``log.cleaner.io.buffer.load.factor``; each entry
is charged :data:`ENTRY_COST_BYTES` plus the key's length, the CPython cost of one entry (the
``bytes`` key object: 33 bytes + its length; the ``int`` value: 32 bytes; the dict's hash/key/value
slot and index: about 30 bytes; rounded up). So the map holds at most
``budget * load_factor // (ENTRY_COST_BYTES + key length)`` entries.

Not thread-safe; one map per clean, used inside one worker process.
"""

from __future__ import annotations

__all__ = ["ENTRY_COST_BYTES", "OffsetMap"]

ENTRY_COST_BYTES = 96
"""Bytes charged per entry on top of the key's length (see the module docstring)."""


class OffsetMap:
    """Keys of the dirty section and the offset of their latest record.

    ``capacity_bytes`` is the budget (already multiplied by the load factor). :meth:`put` returns
    False, storing nothing, when a new key would exceed it (the map is then *full*); a key already
    present can always be updated. :attr:`latest_offset` is the largest offset put or noted with
    :meth:`update_latest_offset` (-1 when none).
    """

    __slots__ = ("_map", "_used", "capacity_bytes", "latest_offset")

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < ENTRY_COST_BYTES:
            raise ValueError(f"an offset map of {capacity_bytes} bytes cannot hold a single entry")
        self.capacity_bytes = capacity_bytes
        self._map: dict[bytes, int] = {}
        self._used = 0
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def used_bytes(self) -> int:
        return self._used

    @property
    def utilization(self) -> float:
        """Fraction of the budget used (Kafka's ``max-buffer-utilization-percent`` / 100)."""
        return self._used / self.capacity_bytes

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest for ``key``; False (nothing stored) when full."""
        m = self._map
        if key not in m:
            cost = ENTRY_COST_BYTES + len(key)
            if self._used + cost > self.capacity_bytes:
                return False
            self._used += cost
        m[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``; -1 when the key is not in the map."""
        return self._map.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self._used = 0
        self.latest_offset = -1
