"""The share-partitions a broker leads, as Kafka's ``SharePartitionManager``: ShareFetch acquires
records for a member, ShareAcknowledge (and acknowledgements piggybacked on ShareFetch) settles
them, and acquisition locks run out on a timer.

A share-partition (:class:`~odradek.share.share_partition.SharePartition`) is made on the first
fetch of a (group, partition) on the partition's leader: its durable state is read through the
:class:`~odradek.share.state.Persister`; a share-partition never placed starts where the group's
``share.auto.offset.reset`` says (``latest``, Kafka's default: the high watermark; ``earliest``:
the log start; ``by_duration:<ISO-8601 duration>``: the first offset at or after now minus it),
and that placement is written at once, so a new leader does not place it again. A new leader
epoch drops the share-partition and loads it again (the records acquired under the old leader
are available again with their delivery counts, as Kafka's failover leaves them).

Fetch: each partition's next acquirable offset is read from the log (whole stored batches, as
bytes; never re-encoded), the offsets acquired, and only the batches overlapping what was acquired
answered with the acquired ranges (the client delivers just those offsets). ``max_records`` bounds
the acquired offsets over the whole request; ``share_acquire_mode`` 0 (batch-optimized, the
default) rounds that up to the end of the batch that reaches it, 1 (record-limit) does not. Under
``share.isolation.level=read_committed`` reads stop at the last stable offset and the records of
aborted transactions are archived, not delivered. With nothing acquirable the fetch waits up to
``max_wait_ms`` for an append, an acknowledgement, a release or a lock running out.

Acknowledgements are answered only once the new state is durable (written through the persister);
a write that fails answers its error, and the state is written again with the next change.

Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from odradek.coordinator.group.group_config import GroupConfig, parse_share_auto_offset_reset
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader, iter_batches
from odradek.replication.replica_manager import FetchRequestPartition, ReplicaManager
from odradek.share.share_partition import AcquiredRecords, SharePartition
from odradek.share.share_session import ShareSessionCache, ShareTopicPartition
from odradek.share.state import (
    DEFAULT_DELIVERY_COUNT_LIMIT,
    DEFAULT_PARTITION_MAX_RECORD_LOCKS,
    DEFAULT_RECORD_LOCK_DURATION_MS,
    AcknowledgeType,
    Persister,
    SharePartitionKey,
    ShareStateError,
)
from odradek.storage.results import FileSlice
from odradek.storage.topic_partition import TopicPartition

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_FENCED = frozenset({ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch})


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A share group's settings (group configs over the broker's ``group.share.*`` defaults)."""

    auto_offset_reset: str = "latest"
    isolation_level: int = READ_UNCOMMITTED
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_PARTITION_MAX_RECORD_LOCKS

    @classmethod
    def of(cls, group: GroupConfig, delivery_count_limit: int, max_record_locks: int) -> ShareSettings:
        """From a group's configs and the broker's ``group.share.delivery.count.limit`` and
        ``group.share.partition.max.record.locks`` (broker keys only, as in Kafka 4.2)."""
        return cls(
            auto_offset_reset=group.share_auto_offset_reset,
            isolation_level=READ_COMMITTED if group.share_read_committed else READ_UNCOMMITTED,
            record_lock_duration_ms=group.share_record_lock_duration_ms,
            delivery_count_limit=delivery_count_limit,
            max_record_locks=max_record_locks,
        )


@dataclass(slots=True)
class ShareFetchResult:
    """One partition's ShareFetch answer: the stored batches overlapping ``acquired`` (bytes)."""

    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


@dataclass(slots=True)
class _Entry:
    """A loaded share-partition. ``generation`` counts the changes of its durable view,
    ``written`` the last generation the persister took."""

    sp: SharePartition
    key: SharePartitionKey
    tp: TopicPartition
    leader_epoch: int
    isolation_level: int
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None
    generation: int = 0
    written: int = 0

    def touched(self) -> bool:
        """Take the share-partition's dirty flag into ``generation``; True if it was dirty."""
        if not self.sp.is_dirty:
            return False
        self.sp.mark_clean()
        self.generation += 1
        return True


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class SharePartitionManager:
    """Every share-partition this broker leads, and its share sessions."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        persister: Persister,
        settings_for: Callable[[str], ShareSettings],
        *,
        max_sessions: int = 2000,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.rm = replica_manager
        self.persister = persister
        self.settings_for = settings_for
        self.sessions = ShareSessionCache(max_sessions)
        self.wall_clock_ms = wall_clock_ms
        self._entries: dict[tuple[str, TopicPartition], _Entry] = {}
        self._loading: dict[tuple[str, TopicPartition], asyncio.Future[_Entry]] = {}
        self._changed = asyncio.Event()

    # -- share-partitions ---------------------------------------------------------------------

    def share_partitions(self, group_id: str) -> dict[TopicPartition, SharePartition]:
        return {tp: e.sp for (g, tp), e in self._entries.items() if g == group_id}

    async def _entry(self, group_id: str, stp: ShareTopicPartition) -> _Entry:
        """The loaded share-partition (loading it once however many fetches ask at once).
        Raises KafkaError (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION ...) or
        ShareStateError."""
        tp = TopicPartition(stp.topic, stp.partition)
        partition = self.rm.leader_partition(tp)
        k = (group_id, tp)
        entry = self._entries.get(k)
        if entry is not None:
            if entry.leader_epoch == partition.leader_epoch:
                return entry
            self._drop(k)
        pending = self._loading.get(k)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[k] = pending
            try:
                entry = await self._load(group_id, stp, tp, partition.leader_epoch)
            except BaseException as exc:
                self._loading.pop(k, None)
                if not pending.done():
                    pending.set_exception(exc)
                    pending.exception()  # retrieved: waiters, if any, get it too
                raise
            self._loading.pop(k, None)
            self._entries[k] = entry
            pending.set_result(entry)
            return entry
        return await asyncio.shield(pending)

    async def _load(self, group_id: str, stp: ShareTopicPartition, tp: TopicPartition, leader_epoch: int) -> _Entry:
        settings = self.settings_for(group_id)
        key = SharePartitionKey(group_id, stp.topic_id, stp.partition)
        state = await self.persister.read_state(key, leader_epoch)
        partition = self.rm.leader_partition(tp)
        log_start = partition.log.log_start_offset
        placed = state is not None and state.start_offset >= 0
        reset = log_start if placed else self._reset_offset(tp, settings)
        sp = SharePartition(
            key,
            record_lock_duration_ms=settings.record_lock_duration_ms,
            delivery_count_limit=settings.delivery_count_limit,
            max_in_flight_records=settings.max_record_locks,
        )
        sp.load(state, log_start_offset=log_start, reset_offset=reset)
        if not placed:
            if state is None:
                await self.persister.initialize_state(key, sp.state_epoch, -1)
            await self.persister.write_state(key, sp.state_epoch, leader_epoch, sp.start_offset, sp.state_batches())
        sp.mark_clean()
        log.info("share-partition %s of group %s loaded at start offset %d", tp, group_id, sp.start_offset)
        return _Entry(sp, key, tp, leader_epoch, settings.isolation_level)

    def _reset_offset(self, tp: TopicPartition, settings: ShareSettings) -> int:
        strategy, since_ms = parse_share_auto_offset_reset(settings.auto_offset_reset)
        if strategy == "earliest":
            return self.rm.fetch_offset_for_timestamp(tp, -2)[0]
        if strategy == "by_duration" and since_ms is not None:
            found = self.rm.fetch_offset_for_timestamp(tp, self.wall_clock_ms() - since_ms, settings.isolation_level)
            if found[0] >= 0:
                return found[0]
        return self.rm.fetch_offset_for_timestamp(tp, -1, settings.isolation_level)[0]

    def _drop(self, k: tuple[str, TopicPartition], only: _Entry | None = None) -> None:
        """Forget a share-partition (``only`` if given: not one loaded since)."""
        if only is not None and self._entries.get(k) is not only:
            return
        entry = self._entries.pop(k, None)
        if entry is not None and entry.timer is not None:
            entry.timer.cancel()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _arm(self, entry: _Entry) -> None:
        """(Re)schedule the share-partition's lock timer for its earliest lock deadline."""
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        deadline = entry.sp.next_lock_deadline()
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - _now_ms()) / 1000.0)
        entry.timer = loop.call_later(delay, self._locks_expired, entry)

    def _locks_expired(self, entry: _Entry) -> None:
        entry.timer = None
        if self._entries.get((entry.key.group_id, entry.tp)) is not entry:
            return
        if entry.sp.expire_locks(_now_ms()):
            entry.touched()
            asyncio.get_running_loop().create_task(self._persist_logged(entry))
            self._notify()
        self._arm(entry)

    async def _persist(self, entry: _Entry) -> None:
        """Write the share-partition's durable view if it changed; raises ShareStateError."""
        async with entry.write_lock:
            entry.touched()
            generation = entry.generation
            if entry.written >= generation:
                return
            sp = entry.sp
            try:
                await self.persister.write_state(
                    entry.key, sp.state_epoch, entry.leader_epoch, sp.start_offset, sp.state_batches()
                )
            except ShareStateError as exc:
                if exc.error_code in _FENCED:  # the state moved on (offsets altered, a newer leader)
                    self._drop((entry.key.group_id, entry.tp), entry)
                raise
            entry.written = max(entry.written, generation)

    async def _persist_logged(self, entry: _Entry) -> None:
        try:
            await self._persist(entry)
        except ShareStateError as exc:
            log.warning("share state of %s not written: %s", entry.key, exc)

    # -- fetch ----------------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        parts: Sequence[ShareTopicPartition],
        *,
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        record_limit: bool = False,
    ) -> dict[ShareTopicPartition, ShareFetchResult]:
        """Acquire records of ``parts`` for ``member_id``: answers at once when anything was acquired
        or a partition erred, else waits up to ``max_wait_ms`` for something to acquire. (Records
        acquired are locked, so the fetch never holds them back to gather ``min_bytes``: Kafka's
        delayed share fetch waits for ``min_bytes`` before acquiring; here any acquirable record
        answers.)"""
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000.0
        while True:
            changed = self._changed
            results, waits = await self._acquire_all(group_id, member_id, parts, max_bytes, max_records, record_limit)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or any(r.acquired or r.error_code != ErrorCode.none for r in results.values()):
                return results
            await self._wait(changed, waits, remaining)

    async def _wait(self, changed: asyncio.Event, waits: list[FetchRequestPartition], remaining: float) -> None:
        """Until a share-partition changes here or one of ``waits`` (fetch positions at the log's
        end) gets an append, at most ``remaining`` seconds."""
        tasks: list[asyncio.Task[object]] = [asyncio.ensure_future(changed.wait())]
        if waits:
            tasks.append(
                asyncio.ensure_future(
                    self.rm.fetch_messages(waits, max_wait_ms=int(remaining * 1000), min_bytes=1, max_bytes=1)
                )
            )
        try:
            await asyncio.wait(tasks, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                if not t.done():
                    t.cancel()
            for t in tasks:
                if t.done() and not t.cancelled():
                    t.exception()

    async def _acquire_all(
        self,
        group_id: str,
        member_id: str,
        parts: Sequence[ShareTopicPartition],
        max_bytes: int,
        max_records: int,
        record_limit: bool,
    ) -> tuple[dict[ShareTopicPartition, ShareFetchResult], list[FetchRequestPartition]]:
        results: dict[ShareTopicPartition, ShareFetchResult] = {}
        waits: list[FetchRequestPartition] = []
        budget_bytes, budget_records = max_bytes, max_records
        per_partition = max(1, max_bytes // max(1, len(parts)))
        for stp in parts:
            result = ShareFetchResult()
            results[stp] = result
            try:
                entry = await self._entry(group_id, stp)
            except (KafkaError, ShareStateError) as exc:
                result.error_code, result.error_message = exc.error_code, str(exc)
                continue
            if budget_records <= 0 or budget_bytes <= 0:
                continue
            tp = TopicPartition(stp.topic, stp.partition)
            local = self.rm.partitions.get(tp)
            if local is not None and entry.sp.move_log_start(local.log.log_start_offset):
                entry.touched()  # retention or DeleteRecords removed records below the window
            offset = entry.sp.fetch_offset()
            if offset is None:
                continue
            read = FetchRequestPartition(tp, offset, min(per_partition, budget_bytes), entry.leader_epoch)
            try:
                (fetched,) = await self.rm.fetch_messages(
                    [read], max_wait_ms=0, min_bytes=0, max_bytes=budget_bytes, isolation_level=entry.isolation_level
                )
            except KafkaError as exc:
                result.error_code, result.error_message = exc.error_code, str(exc)
                continue
            if fetched.error_code != ErrorCode.none:
                result.error_code = fetched.error_code
                continue
            raw = fetched.records
            data = raw.read_bytes() if isinstance(raw, FileSlice) else (raw or b"")
            if not data:
                if offset >= entry.sp.end_offset:
                    waits.append(read)
                continue
            acquired, records = self._acquire(
                entry, member_id, data, offset, fetched.aborted_transactions, budget_records, record_limit
            )
            if acquired:
                result.acquired, result.records = acquired, records
                budget_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                budget_bytes -= len(records)
                self._arm(entry)
            if entry.touched():  # delivery counts went up (kept across a failover), records archived
                await self._persist_logged(entry)
        return results, waits

    def _acquire(
        self,
        entry: _Entry,
        member_id: str,
        data: bytes,
        offset: int,
        aborted: list[tuple[int, int]] | None,
        max_records: int,
        record_limit: bool,
    ) -> tuple[list[AcquiredRecords], bytes]:
        headers = list(iter_batches(data))
        spans = [(h.base_offset, h.last_offset) for _, h in headers]
        limit = max_records
        if not record_limit:  # batch-optimized: up to the end of the batch reaching max_records
            counted = 0
            for first, last in spans:
                counted += last - max(first, offset) + 1
                if counted >= max_records:
                    limit = max(max_records, counted)
                    break
        archive = _aborted_ranges(headers, aborted) if aborted else []
        acquired = entry.sp.acquire(
            member_id, spans, max_records=limit, now_ms=_now_ms(), archive=archive, read_offset=offset
        )
        if not acquired:
            return [], b""
        chunks: list[bytes] = []
        view = memoryview(data)
        i = 0
        for pos, h in headers:
            while i < len(acquired) and acquired[i].last_offset < h.base_offset:
                i += 1
            if i < len(acquired) and acquired[i].first_offset <= h.last_offset:
                chunks.append(bytes(view[pos : pos + h.size_in_bytes]))
        return acquired, b"".join(chunks)

    # -- acknowledgements and releases ---------------------------------------------------------

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: dict[ShareTopicPartition, list[tuple[int, int, list[AcknowledgeType]]]],
    ) -> dict[ShareTopicPartition, tuple[ErrorCode, str | None]]:
        """Settle ``acks`` (per partition all or nothing); each answered once durable."""
        answers: dict[ShareTopicPartition, tuple[ErrorCode, str | None]] = {}
        touched: list[tuple[ShareTopicPartition, _Entry]] = []
        for stp, batches in acks.items():
            try:
                entry = await self._entry(group_id, stp)
            except (KafkaError, ShareStateError) as exc:
                answers[stp] = (exc.error_code, str(exc))
                continue
            error = entry.sp.acknowledge(member_id, batches, _now_ms())
            if error is not None:
                answers[stp] = (error, None)
                continue
            entry.touched()
            touched.append((stp, entry))
        if touched:
            self._notify()
        for stp, entry in touched:
            self._arm(entry)
            try:
                await self._persist(entry)
                answers[stp] = (ErrorCode.none, None)
            except ShareStateError as exc:
                answers[stp] = (exc.error_code, exc.message)
        return answers

    async def release(self, group_id: str, member_id: str, parts: Sequence[ShareTopicPartition] | None = None) -> None:
        """The member's acquired records (on ``parts``, else on every share-partition of the group
        here) become available to others: its session closed or it left the group."""
        entries = [
            e
            for (g, tp), e in list(self._entries.items())
            if g == group_id
            and (parts is None or any(p.topic == tp.topic and p.partition == tp.partition for p in parts))
        ]
        changed = [e for e in entries if e.sp.release_member(member_id)]
        for entry in changed:
            entry.touched()
        if changed:
            self._notify()
        for entry in changed:
            self._arm(entry)
            await self._persist_logged(entry)

    async def close_session(self, group_id: str, member_id: str) -> None:
        """The member closed its share session here: its records are released; when no session of
        the group is left on this broker the group is empty here and its share-partitions are
        dropped (written first), as Kafka's leader does when a group empties. So their next fetch
        loads the state again: offsets altered meanwhile (AlterShareGroupOffsets, which needs the
        group empty) are seen."""
        closed = self.sessions.close(group_id, member_id)
        if closed is not None:
            await self.release(group_id, member_id, list(closed.partitions))
        if self.sessions.of_group(group_id):
            return
        for k, entry in [(k, e) for k, e in self._entries.items() if k[0] == group_id]:
            await self._persist_logged(entry)
            if not self.sessions.of_group(group_id):
                self._drop(k, entry)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: the share sessions last used over it end (Kafka's share
        session cache evicts them with their connection), so a consumer killed without closing
        gives its records back now rather than when their locks run out."""
        if not len(self.sessions):
            return
        for session in self.sessions.of_connection(connection_id):
            asyncio.get_running_loop().create_task(self.close_session(session.group_id, session.member_id))

    def member_removed(self, group_id: str, member_id: str) -> None:
        """The group's coordinator (on this broker) removed the member. With a share session here
        the member is closing (librdkafka leaves the group before its last ShareAcknowledge, which
        accepts what its last poll returned): its records go back when that session closes, or
        its connection does. Without one (its session expired), they are released at once, not
        after their locks. A member's records on other brokers go back with its sessions there."""
        if self.sessions.get(group_id, member_id) is None:
            asyncio.get_running_loop().create_task(self.release(group_id, member_id))

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """A new leader epoch: share-partitions of an older one load again at their next fetch."""
        for k in [k for k, e in self._entries.items() if k[1] == tp and e.leader_epoch != leader_epoch]:
            self._drop(k)

    def on_become_follower(self, tp: TopicPartition) -> None:
        """This broker no longer leads ``tp``: its share-partitions go (the new leader loads them)."""
        for k in [k for k in self._entries if k[1] == tp]:
            self._drop(k)

    def close(self) -> None:
        for k in list(self._entries):
            self._drop(k)


def _aborted_ranges(headers: list[tuple[int, BatchHeader]], aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Offset ranges of aborted transactional batches in ``headers`` (Kafka's consumer-side rule:
    a transactional batch of a producer whose aborted transaction started at or before it, up to
    that producer's abort marker)."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    i = 0
    for _, h in headers:
        while i < len(pending) and pending[i][1] <= h.last_offset:
            active.add(pending[i][0])
            i += 1
        if not h.is_transactional or h.producer_id not in active:
            continue
        if h.is_control:
            active.discard(h.producer_id)
            continue
        out.append((h.base_offset, h.last_offset))
    return out
