"""The broker-wide cleaner settings (Kafka's ``CleanerConfig``), from the ``log.cleaner.*`` keys.

Per-topic keys (``cleanup.policy``, ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``delete.retention.ms``, ``segment.bytes``) live in the log's
:class:`~odradek.storage.config.LogConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CLEANER_KEYS", "CleanerConfig"]

CLEANER_KEYS = (
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
)
"""The broker keys :meth:`CleanerConfig.from_props` reads."""

_UNBOUNDED = 1.7976931348623157e308  # Kafka's Double.MaxValue default of io.max.bytes.per.second


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """``log.cleaner.*`` values with Kafka's defaults.

    ``dedupe_buffer_size`` is shared by the ``num_threads`` cleaners (each map gets
    ``dedupe_buffer_size / num_threads * io_buffer_load_factor`` bytes). ``io_buffer_size`` is
    accepted as Kafka's (the worker reads segments through ``mmap``).
    """

    enable_cleaner: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_size: int = 524288
    io_buffer_load_factor: float = 0.9
    max_io_bytes_per_second: float = _UNBOUNDED
    backoff_ms: int = 15000

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> CleanerConfig:
        """From a broker config (anything with ``log.cleaner.*`` keys; missing ones default)."""

        def get(key: str, default: Any) -> Any:
            try:
                value = props[key]
            except KeyError:
                return default
            return default if value is None else value

        d = cls()
        threads = int(get("log.cleaner.threads", d.num_threads))
        return cls(
            enable_cleaner=bool(get("log.cleaner.enable", d.enable_cleaner)) and threads > 0,
            num_threads=max(threads, 1),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size)),
            io_buffer_size=int(get("log.cleaner.io.buffer.size", d.io_buffer_size)),
            io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor", d.io_buffer_load_factor)),
            max_io_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second", d.max_io_bytes_per_second)),
            backoff_ms=int(get("log.cleaner.backoff.ms", d.backoff_ms)),
        )

    @property
    def map_capacity_bytes(self) -> int:
        """The offset map budget of one cleaner: its share of the buffer times the load factor."""
        return int(self.dedupe_buffer_size / self.num_threads * self.io_buffer_load_factor)

    @property
    def io_bytes_per_second_per_thread(self) -> float:
        if self.max_io_bytes_per_second >= _UNBOUNDED:
            return float("inf")
        return self.max_io_bytes_per_second / self.num_threads
