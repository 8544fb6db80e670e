"""What to read: offset resolution for batch queries and micro-batch planning for streams.

Driver side only, and free of pyspark so it is unit-tested with a fake client:

* :func:`resolve_offsets` turns an offset option (earliest, latest, JSON, timestamps) into
  concrete offsets for the partitions a subscription covers;
* :func:`plan_batch` gives the ranges of a batch query (runs in the planner worker);
* :class:`StreamPlanner` holds a streaming query's source state for one run of the query and
  lives in Spark's stream-runner worker: the memoised initial offset and its anchor, the
  Trigger.AvailableNow target, the ``minOffsetsPerTrigger`` clock and the last seen latest
  offsets.

The anchor (why ``startingOffsets=latest`` needs one): Spark does not journal a Python source's
initial offset, so a query restarted before its first batch commits asks for it again, and
"latest" would then have moved. The planner therefore stores the resolved offsets as the
committed offsets of :meth:`SourceOptions.anchor_group` and, on a later start, reuses a
committed offset where the group has one. After each batch it commits the batch start (Spark's
``commit``), so the group also shows the query's progress to ordinary Kafka tools. When the
cluster cannot store group offsets, the planner logs a warning and runs unanchored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from odradek.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
    format_tp,
    format_tps,
    plan_ranges,
    rate_limit,
    resolve_ranges,
    split_ranges,
    total_new_records,
)
from odradek.spark.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    SourceOptions,
    SpecificOffsets,
    Strategy,
)

__all__ = ["OffsetClient", "StreamPlanner", "plan_batch", "resolve_offsets"]

log = logging.getLogger(__name__)

ANCHOR_TIMEOUT_MS = 5_000
"""Upper bound for group-offset calls: an anchor is a convenience, never a reason to stall."""


class OffsetClient(Protocol):
    """What planning needs from the cluster (:class:`odradek.spark.driver.DriverClient`)."""

    def assigned_partitions(self, strategy: Strategy) -> list[TopicPartition]: ...
    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets: ...
    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets: ...
    def offsets_for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets: ...
    def committed(
        self, group: str, tps: Iterable[TopicPartition], timeout_ms: int | None = None
    ) -> PartitionOffsets: ...
    def commit(self, group: str, offsets: Mapping[TopicPartition, int], timeout_ms: int | None = None) -> None: ...
    def close(self) -> None: ...


def _check_covers(given: Iterable[TopicPartition], assigned: list[TopicPartition], option: str) -> None:
    if set(given) != set(assigned):
        if option.endswith("ByTimestamp"):
            raise ValueError(
                f"If starting/endingOffsetsByTimestamp contains specific offsets, you must specify all "
                f"topics. Specified: {format_tps(given)} Assigned: {format_tps(assigned)}"
            )
        raise ValueError(
            f"If {option} contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest. Specified: {format_tps(given)} Assigned: {format_tps(assigned)}"
        )


def resolve_offsets(
    client: OffsetClient, spec: OffsetSpec, assigned: list[TopicPartition], *, starting: bool
) -> PartitionOffsets:
    """Concrete offsets for ``assigned`` from one offset option.

    JSON offsets must name exactly the assigned partitions (``-2``/``-1`` resolve to earliest
    and latest). A timestamp with no record at or after it resolves, for an ending offset, to
    latest; for a starting offset, to latest with ``startingOffsetsByTimestampStrategy=latest``
    and to an error with the default ``error``.
    """
    if isinstance(spec, Earliest):
        return client.earliest(assigned)
    if isinstance(spec, Latest):
        return client.latest(assigned)
    if isinstance(spec, SpecificOffsets):
        _check_covers(spec.offsets, assigned, "startingOffsets" if starting else "endingOffsets")
        resolved = dict(spec.offsets)
        resolved.update(client.earliest([tp for tp, o in spec.offsets.items() if o == EARLIEST]))
        resolved.update(client.latest([tp for tp, o in spec.offsets.items() if o == LATEST]))
        return resolved
    if isinstance(spec, GlobalTimestamp):
        timestamps = {tp: spec.timestamp_ms for tp in assigned}
    else:
        _check_covers(
            spec.timestamps, assigned, "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp"
        )
        timestamps = dict(spec.timestamps)
    found = client.offsets_for_timestamps(timestamps)
    unmatched = sorted(tp for tp in timestamps if found.get(tp, -1) < 0)
    if unmatched and starting and spec.no_match == "error":
        tp = unmatched[0]
        raise ValueError(
            f"No offset matched from request of topic-partition {format_tp(tp)} and timestamp {timestamps[tp]}."
        )
    resolved = {tp: found[tp] for tp in timestamps if tp not in unmatched}
    resolved.update(client.latest(unmatched))
    return resolved


def plan_batch(client: OffsetClient, options: SourceOptions) -> list[OffsetRange]:
    """Ranges of a batch query: start and end resolved against the current assignment, then split
    for ``minPartitions``/``maxRecordsPerPartition``. An empty assignment gives no range."""
    assigned = client.assigned_partitions(options.strategy)
    start = resolve_offsets(client, options.starting, assigned, starting=True)
    end = resolve_offsets(client, options.ending, assigned, starting=False)
    ranges = plan_ranges(start, end)
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


class StreamPlanner:
    """Source state of one run of a streaming query (see module docstring).

    ``client_factory`` is called lazily, once, so the planner can be built (and pickled) before
    any connection exists. ``clock_ms`` is injectable for tests.
    """

    def __init__(
        self,
        options: SourceOptions,
        client_factory: Callable[[], OffsetClient],
        clock_ms: Callable[[], float] = lambda: time.time() * 1000,
    ) -> None:
        self.options = options
        self._client_factory = client_factory
        self._client: OffsetClient | None = None
        self._clock_ms = clock_ms
        self._initial: PartitionOffsets | None = None
        self._available_now = False
        self._target: PartitionOffsets | None = None
        self._last_trigger_ms = 0.0
        self._commits_enabled = True
        self.latest_seen: PartitionOffsets | None = None

    @property
    def client(self) -> OffsetClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def _tracks_group(self) -> bool:
        return self.options.starts_at_latest or bool(self.options.group_id)

    # ----------------------------------------------------------------------------- initial offset
    def initial_offset(self) -> PartitionOffsets:
        """The query's first start offsets, resolved once per run (Spark asks twice)."""
        if self._initial is None:
            self._initial = self._resolve_initial()
        return dict(self._initial)

    def _resolve_initial(self) -> PartitionOffsets:
        opts = self.options
        assigned = self.client.assigned_partitions(opts.strategy)
        if not opts.starts_at_latest:
            return resolve_offsets(self.client, opts.starting, assigned, starting=True)
        if isinstance(opts.starting, SpecificOffsets):
            latest_tps = sorted(tp for tp, o in opts.starting.offsets.items() if o == LATEST)
        else:
            latest_tps = assigned
        group = opts.anchor_group()
        anchored: PartitionOffsets = {}
        try:
            anchored = self.client.committed(group, latest_tps, ANCHOR_TIMEOUT_MS)
        except Exception as exc:  # the anchor is best effort: a cluster without group offsets
            self._commits_enabled = False  # ... will not take commits either; do not wait twice
            log.warning(
                "cannot read the starting-offset anchor of group '%s' (%s); "
                "startingOffsets=latest is resolved without an anchor",
                group,
                exc,
            )
        resolved = resolve_offsets(self.client, opts.starting, assigned, starting=True)
        for tp in latest_tps:
            if tp in anchored:
                resolved[tp] = anchored[tp]
        if any(tp not in anchored for tp in latest_tps):
            self._commit_group({tp: resolved[tp] for tp in latest_tps if tp in resolved}, "anchor")
        else:
            log.info("starting offsets taken from the committed offsets of group '%s'", group)
        return resolved

    def _commit_group(self, offsets: Mapping[TopicPartition, int], what: str) -> None:
        if not self._commits_enabled or not offsets:
            return
        group = self.options.anchor_group()
        try:
            self.client.commit(group, offsets, ANCHOR_TIMEOUT_MS)
        except Exception as exc:
            self._commits_enabled = False
            log.warning(
                "cannot commit the %s offsets of group '%s' (%s); not committing again in this run", what, group, exc
            )

    # ------------------------------------------------------------------------------ latest offset
    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: the first :meth:`latest_offset` freezes the target."""
        self._available_now = True

    def _fetch_latest(self, start: Mapping[TopicPartition, int]) -> PartitionOffsets:
        """Latest offsets of the current assignment, retried while one is below ``start`` (a
        replica that has not caught up yet); after the retries the lower value stands and
        :meth:`ranges` reports the data loss."""
        retries = self.options.client.fetch_offset_num_retries
        for attempt in range(1, retries + 1):
            latest = self.client.latest(self.client.assigned_partitions(self.options.strategy))
            behind = [tp for tp, off in latest.items() if tp in start and off < start[tp]]
            if not behind or attempt == retries:
                return latest
            log.warning("latest offsets below the known ones for %s; retrying", format_tps(behind))
            time.sleep(self.options.client.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def latest_offset(self, start: Mapping[TopicPartition, int], max_rows: int | None) -> PartitionOffsets:
        """End offsets for the next micro-batch starting at ``start``.

        ``max_rows`` is ``maxOffsetsPerTrigger`` (``None``: all available). Under
        Trigger.AvailableNow the end never passes the target frozen on the first call and
        ``minOffsetsPerTrigger`` is ignored (waiting would end the query early). Otherwise, with
        ``minOffsetsPerTrigger``, returns ``start`` unchanged (no batch) while fewer records are
        available and ``maxTriggerDelay`` has not passed since the last batch.
        """
        if self._available_now:
            if self._target is None:
                self._target = self._fetch_latest(start)
            latest = dict(self._target)
        else:
            latest = self._fetch_latest(start)
        self.latest_seen = latest
        minimum = self.options.min_offsets_per_trigger
        if minimum is not None and not self._available_now:
            now = self._clock_ms()
            if now - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
                self._last_trigger_ms = now
            elif total_new_records(latest, start) < minimum:
                log.debug("delaying the batch: fewer than minOffsetsPerTrigger=%d records", minimum)
                return dict(start)
            else:
                self._last_trigger_ms = now
        if max_rows is None:
            return latest
        new = [tp for tp in latest if tp not in start]
        earliest_of_new = self.client.earliest(new) if new else {}
        return rate_limit(max_rows, start, latest, earliest_of_new)

    # ----------------------------------------------------------------------------- ranges, commit
    def ranges(self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
        """Ranges of the micro-batch ``(start, end]``; new partitions start at earliest and
        lost data is reported per ``failOnDataLoss`` (see :func:`resolve_ranges`)."""
        if dict(start) == dict(end):
            return []
        new = [tp for tp in end if tp not in start]
        earliest_of_new = self.client.earliest(new) if new else {}
        ranges = resolve_ranges(start, end, earliest_of_new, self.options.fail_on_data_loss)
        return split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)

    def commit(self, end: Mapping[TopicPartition, int]) -> None:
        """Spark processed everything up to ``end``: record it as the group's progress when the
        query uses a group (``startingOffsets=latest`` or ``kafka.group.id``). Best effort."""
        if self._tracks_group:
            self._commit_group(end, "progress")
