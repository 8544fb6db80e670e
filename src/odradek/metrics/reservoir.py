"""Bounded sample reservoirs for Kafka's histograms (request stage times, leader elections).

Kafka's Yammer ``Histogram`` keeps an exponentially decaying reservoir of 1,028 samples and
reports percentiles of it; the Prometheus JMX exporter turns them into gauges with a
``quantile`` label. :class:`Reservoir` is the same idea made cheap for the event loop:

- **method**: a sliding window of the last ``size`` (default 1,024, a power of two) samples in a
  ring buffer (a preallocated Python list indexed by ``count & mask``). Recording a sample is one
  list store and one integer add; nothing is sorted or allocated on the hot path. The window
  favours the most recent traffic as Kafka's decaying reservoir does, without its clock. A sample
  may be a tuple of values (a request's six stage times): one store records them all, and
  :meth:`Reservoir.column` reads one of them;
- **quantiles** are computed at scrape time from a sorted copy of the window, with Codahale's
  (Kafka's metrics library) rule: position ``q * (n + 1)``, linear interpolation between the two
  neighbouring samples, clamped to the smallest and largest sample;
- ``count`` is the total number of samples ever recorded (the exporter's ``_count``), not the
  window's size. An empty reservoir reports 0.0 for every quantile, as an idle Kafka histogram does.

Not thread-safe: record and read from one thread (the broker's event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["KAFKA_QUANTILES", "Reservoir", "quantile_of_sorted", "quantiles_of_sorted"]

KAFKA_QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
"""Kafka's histogram percentiles (``50thPercentile`` .. ``999thPercentile``) as the JMX exporter
labels them (``quantile="0.$N"``: ``0.50``, not ``0.5``)."""


def quantile_of_sorted(values: Sequence[float], q: float) -> float:
    """Codahale's ``Snapshot.getValue(q)`` over ascending ``values``; 0.0 when empty.

    ``q`` outside [0, 1] raises ValueError."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not in [0, 1]")
    n = len(values)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return float(values[0])
    if pos >= n:
        return float(values[-1])
    index = int(pos)
    lower = float(values[index - 1])
    upper = float(values[index])
    return lower + (pos - index) * (upper - lower)


class Reservoir:
    """The last ``size`` samples and a running count (see the module docstring)."""

    __slots__ = ("_mask", "_values", "count")

    def __init__(self, size: int = 1024) -> None:
        if size <= 0 or size & (size - 1):
            raise ValueError(f"reservoir size {size} is not a power of two")
        self._values: list[Any] = [0.0] * size
        self._mask = size - 1
        self.count = 0

    def update(self, value: Any) -> None:
        """Record one sample, a number or a tuple of numbers (O(1), no allocation)."""
        self._values[self.count & self._mask] = value
        self.count += 1

    def window(self) -> list[Any]:
        """The window's samples, in no particular order (a copy)."""
        return self._values[: min(self.count, self._mask + 1)]

    def snapshot(self) -> list[float]:
        """The window's samples (numbers), ascending."""
        return sorted(self.window())

    def column(self, index: int) -> list[float]:
        """Item ``index`` of the window's tuple samples, ascending."""
        return sorted(sample[index] for sample in self.window())

    def quantiles(self) -> list[tuple[str, float]]:
        """(label, value) for each of :data:`KAFKA_QUANTILES`, from one sorted snapshot."""
        return quantiles_of_sorted(self.snapshot())


def quantiles_of_sorted(values: Sequence[float]) -> list[tuple[str, float]]:
    """(label, value) for each of :data:`KAFKA_QUANTILES` over ascending ``values``."""
    return [(label, quantile_of_sorted(values, q)) for label, q in KAFKA_QUANTILES]
