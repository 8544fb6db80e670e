"""Offsets of the ``odradek`` Spark source: Kafka's offset JSON, rate limiting, range planning.

Pure Python (no pyspark, no client), used by the driver side of the source (the planner worker
for batch reads, the long-lived stream-runner worker for streaming reads) and by unit tests.

Formats (the ones Spark's Kafka connector uses, so options and checkpoints read the same):

* **Partition offsets**, e.g. ``startingOffsets`` and every streaming offset Spark journals in
  ``checkpoint/offsets/N``: ``{"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}``. In options,
  ``-2`` means earliest and ``-1`` latest. An offset is the *next* offset to read (Kafka's
  consumer position): a partition whose last record has offset 5 is at 6.
* **Assignment** (``assign``): ``{"topicA": [0, 1], "topicB": [2, 4]}``.
* **Partition timestamps** (``startingOffsetsByTimestamp``): ``{"topicA": {"0": 1700000000000}}``
  in milliseconds since the epoch.

Canonical form: Spark compares streaming offsets as JSON *strings*, so every offset this source
returns goes through :func:`canonical_offsets`: topics sorted, partitions in numeric order, keys
as strings, values as ints. Two equal offset maps then serialise identically.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "EARLIEST",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE",
    "LATEST",
    "DataLossError",
    "OffsetRange",
    "PartitionOffsets",
    "TopicPartition",
    "canonical_offsets",
    "format_tp",
    "format_tps",
    "offsets_from_json",
    "parse_assign",
    "parse_partition_offsets",
    "parse_partition_timestamps",
    "plan_ranges",
    "rate_limit",
    "report_data_loss",
    "resolve_ranges",
    "split_ranges",
    "total_new_records",
]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
"""``(topic, partition)``; sorts as Kafka's offset JSON is ordered (topic, then partition number)."""

PartitionOffsets = dict[TopicPartition, int]

LATEST = -1
"""In offset options, resolve to the partition's end (high watermark or last stable offset)."""
EARLIEST = -2
"""In offset options, resolve to the partition's log start offset."""

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the source "
    'option "failOnDataLoss" to "true".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "false".'
)

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_TIMESTAMPS_EXAMPLE = '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'


class DataLossError(RuntimeError):
    """Records the query should have read are gone (retention, truncation, deleted topic).

    Raised only when ``failOnDataLoss`` is true; otherwise the same message is logged and the
    source skips ahead.
    """


def format_tp(tp: TopicPartition) -> str:
    """Kafka's ``TopicPartition.toString``: ``"topic-3"``."""
    return f"{tp[0]}-{tp[1]}"


def format_tps(tps: Iterable[TopicPartition]) -> str:
    """A sorted, bracketed list of partitions for messages: ``"[a-0, a-1]"``."""
    return "[" + ", ".join(format_tp(tp) for tp in sorted(tps)) + "]"


def canonical_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The JSON-ready offset dict: topics sorted, partitions numeric, string keys, int values.

    An empty mapping gives ``{}``.
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(obj: Mapping[str, Mapping[str, object]]) -> PartitionOffsets:
    """Inverse of :func:`canonical_offsets` for an already-decoded offset dict (Spark hands them
    over as dicts). Raises ``ValueError`` on a malformed value."""
    result: PartitionOffsets = {}
    if not isinstance(obj, Mapping):
        raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {obj!r}")
    for topic, partitions in obj.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {obj!r}")
        for partition, offset in partitions.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {obj!r}")
            result[(str(topic), int(partition))] = offset
    return result


def _load_json(text: str, example: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def _nested_int_map(text: str, example: str) -> PartitionOffsets:
    obj = _load_json(text, example)
    if not isinstance(obj, dict):
        raise ValueError(f"Expected e.g. {example}, got {text}")
    result: PartitionOffsets = {}
    for topic, partitions in obj.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"Expected e.g. {example}, got {text}")
        for partition, value in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(f"Expected e.g. {example}, got {text}") from None
            if isinstance(value, bool) or not isinstance(value, int) or number < 0:
                raise ValueError(f"Expected e.g. {example}, got {text}")
            result[(topic, number)] = value
    return result


def parse_partition_offsets(text: str) -> PartitionOffsets:
    """Parse ``startingOffsets``/``endingOffsets`` JSON (``-2`` earliest, ``-1`` latest).

    Raises ``ValueError("Expected e.g. {...}, got <text>")`` like Spark's ``JsonUtils``.
    """
    offsets = _nested_int_map(text, _OFFSETS_EXAMPLE)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ValueError(
                f"Invalid offset {offset} for {format_tp(tp)}: use an offset >= 0, -1 for latest or -2 for earliest"
            )
    return offsets


def parse_partition_timestamps(text: str) -> PartitionOffsets:
    """Parse ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp`` JSON (epoch ms)."""
    return _nested_int_map(text, _TIMESTAMPS_EXAMPLE)


def parse_assign(text: str) -> list[TopicPartition]:
    """Parse ``assign`` JSON into a sorted, duplicate-free partition list."""
    obj = _load_json(text, _ASSIGN_EXAMPLE)
    if not isinstance(obj, dict):
        raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
    result: set[TopicPartition] = set()
    for topic, partitions in obj.items():
        if not isinstance(partitions, list):
            raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        for partition in partitions:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
            result.add((topic, partition))
    return sorted(result)


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError` or log a warning, as ``failOnDataLoss`` says."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


def total_new_records(latest: Mapping[TopicPartition, int], start: Mapping[TopicPartition, int]) -> int:
    """Records between ``start`` and ``latest``; a partition missing from ``start`` counts from 0,
    as Spark's ``minOffsetsPerTrigger`` check does."""
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """End offsets that admit about ``limit`` records, shared in proportion to each lag.

    ``start`` is the batch start, ``latest`` the available end per partition and
    ``earliest_of_new`` the log start of partitions missing from ``start`` (new partitions start
    at earliest). Like Spark's ``rateLimit``, a partition whose share is below one record still
    gets one (no starvation) and no end passes ``latest``. Unlike Spark, which floors every share
    and leaves tiny tail batches, the records the floors leave over go to the partitions with the
    largest remainders (ties: most lag, then partition order), so a batch admits exactly
    ``limit`` records whenever that many are available.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    shares: dict[TopicPartition, int] = {}
    remainders: list[tuple[float, int, TopicPartition]] = []
    for tp in sorted(sizes):
        exact = limit * sizes[tp] / total
        share = math.ceil(exact) if exact < 1 else math.floor(exact)
        shares[tp] = min(share, sizes[tp])
        if exact >= 1:
            remainders.append((exact - share, sizes[tp], tp))
    left = limit - sum(shares.values())
    remainders.sort(key=lambda item: (-item[0], -item[1], item[2]))
    for _, size, tp in remainders:
        if left <= 0:
            break
        if shares[tp] < size:
            shares[tp] += 1
            left -= 1
    result: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp in shares:
            begin = start.get(tp, earliest_of_new.get(tp, 0))
            result[tp] = min(end, begin + shares[tp])
        else:
            result[tp] = end
    return result


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one partition: one Spark task reads it."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        """Offsets in the range (records may be fewer: compaction, transaction markers)."""
        return self.until_offset - self.from_offset

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def resolve_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """Ranges for a micro-batch from resolved ``start`` and ``end`` offsets (Spark's
    ``getOffsetRangesFromResolvedOffsets``).

    Partitions only in ``end`` are new and start at ``earliest_of_new`` (data loss if that is not
    0, or if their earliest offset could not be found); partitions only in ``start`` are gone
    (data loss); an end below its start means the partition was truncated or recreated (data
    loss, and the range is dropped). Empty ranges are dropped. Sorted by partition.
    """
    new = set(end) - set(start)
    missing = new - set(earliest_of_new)
    if missing:
        report_data_loss(
            f"Cannot find earliest offsets of {format_tps(missing)}. Some data may have been missed",
            fail_on_data_loss,
        )
    for tp in sorted(new & set(earliest_of_new)):
        if earliest_of_new[tp] != 0:
            report_data_loss(
                f"Added partition {format_tp(tp)} starts from {earliest_of_new[tp]} instead of 0. "
                "Some data may have been missed",
                fail_on_data_loss,
            )
    gone = set(start) - set(end)
    if gone:
        report_data_loss(f"{format_tps(gone)} are gone. Some data may have been missed", fail_on_data_loss)
    ranges = []
    for tp in sorted(end):
        begin = start[tp] if tp in start else earliest_of_new.get(tp)
        if begin is None:
            continue
        if end[tp] < begin:
            report_data_loss(
                f"Partition {format_tp(tp)}'s offset was changed from {begin} to {end[tp]}, "
                "some data may have been missed",
                fail_on_data_loss,
            )
        if end[tp] > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, end[tp]))
    return ranges


def _split_even(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    result = []
    remaining = rng.size
    begin = rng.from_offset
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        if size > 0:
            result.append(OffsetRange(rng.topic, rng.partition, begin, begin + size))
        begin += size
    return result


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split ranges into Spark tasks (Spark's ``KafkaOffsetRangeCalculator``).

    Empty ranges are dropped. ``maxRecordsPerPartition`` first splits every range into even parts
    of at most that many offsets. Then, if ``minPartitions`` exceeds the number of ranges, large
    ranges are split in proportion to their size so that there are about ``minPartitions``
    tasks; small ranges stay whole. Order: by partition, then offset.
    """
    result = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        result = [piece for r in result for piece in _split_even(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is None or len(result) >= min_partitions:
        return result
    total = sum(r.size for r in result)

    def part_count(size: int, whole: int, parts: int) -> int:
        return max(round(size / whole * parts), 1)

    unsplit = [r for r in result if part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in result:
        parts = 1 if r in unsplit else part_count(r.size, split_total, split_min)
        out.extend(_split_even(r, parts))
    return out


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
) -> list[OffsetRange]:
    """Ranges for a batch query from resolved offsets with identical partition sets.

    Data loss (a start below the log start) is found by the executors while fetching.
    A start above its end raises ``ValueError`` (Spark's
    ``RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET``); equal offsets give no range.
    """
    ranges = []
    for tp in sorted(end):
        begin, until = start[tp], end[tp]
        if begin > until:
            raise ValueError(
                f"The resolved start offset {begin} is greater than the resolved end offset {until} "
                f"for topic {tp[0]} partition {tp[1]}. There may be multiple reasons: 1. Start "
                "offset is set to too big a value that after resolution, end offset is smaller "
                "than it (a start timestamp with an end offset, a start offset with an end "
                "timestamp, or a start offset with the end at latest). 2. The Kafka topic "
                "partition is broken."
            )
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges
