"""Followers: one fetcher per source broker copies the leader's log (Kafka's ReplicaFetcherManager/Thread).

:class:`ReplicaFetcherManager` keeps ``num.replica.fetchers`` fetchers per leader broker; a
partition goes to fetcher ``hash(topic, partition) % num.replica.fetchers`` of its leader. Each
:class:`ReplicaFetcher` is one task with one connection (:class:`~odradek.client.connection.
KafkaConnection`) to the leader's inter-broker endpoint, and loops:

1. **Truncation** (KIP-101, on becoming follower and after an out-of-range answer): one
   OffsetForLeaderEpoch request for every partition that needs it, asking for the end offset of
   the follower's latest leader epoch. The follower truncates to the smaller of that offset and
   its own end offset for the epoch the leader answered with; an undefined answer (the leader
   knows no such epoch) truncates to the high watermark, Kafka's fallback.
2. **Fetch**: one Fetch request (``replica_id`` = this broker) for all its partitions, at their
   log end offsets, ``replica.fetch.max.bytes`` per partition, ``replica.fetch.response.max.bytes``
   in all, long-polling ``replica.fetch.wait.max.ms`` for ``replica.fetch.min.bytes``. Returned
   batches are appended as they are (offsets assigned by the leader); the follower's high
   watermark becomes min(leader's high watermark, own log end offset). Each request names the
   epoch of the follower's last batch; an answer with ``diverging_epoch`` (the leader's log
   diverged from ours there) truncates as an OffsetForLeaderEpoch answer would. Requests go in
   an incremental fetch session (KIP-227, :mod:`odradek.replication.fetch_session_handler`):
   after the first, full, request each names only the partitions whose fetch parameters changed
   (a partition that appended, truncated or changed leader epoch) and forgets those no longer
   fetched (moved away, backing off, throttled); the answer carries only the partitions with
   news. The fetcher computes the parameters only of the partitions that may have changed
   (:attr:`ReplicaFetcher.dirty`: added, answered, truncated, their log start moved by
   retention), so an idle fetcher's request costs nothing per partition.
   FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or an answer that does not
   match the request makes the next request a full one, at once.
3. **Errors**: a partition answered NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
   UNKNOWN_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION waits ``replica.fetch.backoff.ms`` (the
   controller's next LeaderAndIsr decides); OFFSET_OUT_OF_RANGE truncates again (or, when the
   leader's log starts after ours ends, restarts the log empty at the leader's start); a lost
   connection or a timeout closes the connection and backs off.

A fetcher left with no partitions (they moved to another leader, this broker became their leader,
or they were stopped) is stopped and its connection closed right after the change that emptied
it, as Kafka's ``ReplicaFetcherManager.shutdownIdleFetcherThreads`` after LeaderAndIsr and
StopReplica: the check runs once the event loop gets back to it, so a partition moved between
two partitions' changes of one request (removed, then added again) keeps its fetcher.

The leader learns each follower's log end offset from the fetch offsets (``Partition.
update_follower_fetch_state``); that is how the high watermark and the ISR move.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaConnectionError, KafkaProtocolError, KafkaTimeoutError
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode, KafkaError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.records import LOG_OVERHEAD, iter_batches
from odradek.replication.fetch_session_handler import FetchSessionHandler, PartitionParams
from odradek.replication.partition import Partition
from odradek.replication.quota import ReplicationQuota
from odradek.storage import TopicPartition
from odradek.storage.leader_epoch import UNDEFINED_EPOCH_OFFSET

log = logging.getLogger(__name__)

FETCH_MAX_VERSION = 12
SESSION_ERRORS = {ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch}
"""Top-level answers after which the fetcher sends a full fetch at once (no back-off)."""
RETRY_LATER = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.replica_not_available,
    ErrorCode.kafka_storage_error,
}


ENDPOINT_RETRY_S = 0.05
THROTTLE_PAUSE_S = 0.1
"""How long a fetcher whose every partition is throttled waits before it looks at the rate again."""


class LeaderUnknownError(Exception):
    """The leader's address is not in the metadata cache yet."""


@dataclass(frozen=True)
class FetcherConfig:
    """The ``replica.fetch.*`` keys and ``num.replica.fetchers``."""

    num_fetchers: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000
    quota: ReplicationQuota = field(default_factory=ReplicationQuota)
    """The follower-side replication throttle, shared by every fetcher of the broker."""
    on_storage_error: Callable[[Partition, OSError], None] | None = None
    """Called when a follower append fails with an I/O error (its log dir goes offline)."""
    security: ClientSecurity = PLAINTEXT_SECURITY
    """How followers connect to the leaders' inter-broker listener."""


@dataclass
class FetchState:
    truncating: bool = True
    delayed_until: float = 0.0
    generation: int = 0
    """The fetcher's :attr:`ReplicaFetcher.generation` when the partition was added."""


class ReplicaFetcher:
    """Fetches one leader's partitions for this broker; one task, one connection."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        index: int,
        partition_for: Callable[[TopicPartition], Partition | None],
        endpoint_for: Callable[[int], tuple[str, int] | None],
        config: FetcherConfig,
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.name = f"ReplicaFetcher-{index}-{leader_id}"
        self.partition_for = partition_for
        self.endpoint_for = endpoint_for
        self.config = config
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._conn: KafkaConnection | None = None
        self.session = FetchSessionHandler(leader_id)
        """This fetcher's fetch session with its leader (:mod:`odradek.replication.fetch_session_handler`)."""
        self.dirty: set[TopicPartition] = set()
        """Partitions whose fetch parameters may have changed since the last request (added, answered,
        truncated, their log start moved): an incremental request computes only theirs."""
        self.generation = 0
        """Counts requests sent and partitions added: an answer is used only for partitions
        added before its request went out."""
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def add(self, tp: TopicPartition) -> None:
        self.generation += 1
        self.partitions[tp] = FetchState(generation=self.generation)
        self.dirty.add(tp)
        self._wakeup.set()

    def mark_changed(self, tp: TopicPartition) -> None:
        """``tp``'s log changed outside the fetcher (its log start moved): send its parameters again."""
        if tp in self.partitions:
            self.dirty.add(tp)

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        """Stop the task and close the connection. The loop also checks a flag: on Python 3.11 a
        cancellation that lands as ``asyncio.wait_for``'s inner wait completes can be lost."""
        self._stopping = True
        self._wakeup.set()
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> KafkaConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        endpoint = self.endpoint_for(self.leader_id)
        if endpoint is None:
            raise LeaderUnknownError(f"broker {self.leader_id} is not known to be alive yet")
        conn = KafkaConnection(
            endpoint[0],
            endpoint[1],
            client_id=f"broker-{self.broker_id}-fetcher",
            request_timeout_ms=self.config.request_timeout_ms,
            security=self.config.security,
        )
        self._conn = await conn.connect()
        return self._conn

    async def _run(self) -> None:
        backoff = self.config.backoff_ms / 1000
        while not self._stopping:
            ready = self._ready()
            if not ready:
                self._wakeup.clear()
                delays = [s.delayed_until for s in self.partitions.values() if s.delayed_until]
                timeout = max(0.0, min(delays) - time.monotonic()) if delays else None
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except TimeoutError:
                    pass
                continue
            try:
                conn = await self._connection()
                truncating = [tp for tp in ready if self.partitions[tp].truncating]
                if truncating:
                    await self._truncate(conn, truncating)
                    continue
                await self._fetch(conn, ready)
            except asyncio.CancelledError:
                raise
            except LeaderUnknownError:
                # LeaderAndIsr can arrive before the UpdateMetadata that names the leader's address
                await asyncio.sleep(ENDPOINT_RETRY_S)
            except (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError, UnsupportedVersionError) as exc:
                log.warning("%s: %s; retrying in %d ms", self.name, exc, self.config.backoff_ms)
                await self._close()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("%s: unexpected error; retrying in %d ms", self.name, self.config.backoff_ms)
                await self._close()
                await asyncio.sleep(backoff)

    def _ready(self) -> list[TopicPartition]:
        now = time.monotonic()
        return [tp for tp, s in self.partitions.items() if s.delayed_until <= now and self.partition_for(tp)]

    def _delay(self, tp: TopicPartition, error: ErrorCode) -> None:
        state = self.partitions.get(tp)
        if state is not None:
            state.delayed_until = time.monotonic() + self.config.backoff_ms / 1000
            log.info("%s: %s-%d answered %s; backing off", self.name, tp.topic, tp.partition, error.name)

    # --- truncation ----------------------------------------------------------------------------

    async def _truncate(self, conn: KafkaConnection, tps: list[TopicPartition]) -> None:
        rb = conn.builder(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3)
        by_topic: dict[str, list[object]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp in tps:
            partition = self.partition_for(tp)
            assert partition is not None and partition.epoch_cache is not None
            epoch = partition.epoch_cache.latest_epoch
            if partition.log.log_end_offset == partition.log.log_start_offset:  # empty: nothing to truncate
                self._truncate_to(partition, partition.log.log_end_offset, "empty log")
                continue
            if epoch < 0:  # no epochs: Kafka's fallback, truncate to the high watermark
                self._truncate_to(partition, partition.high_watermark, "no leader epoch known")
                continue
            asked[tp] = epoch
            by_topic.setdefault(tp.topic, []).append(
                rb.make(
                    "OffsetForLeaderPartition",
                    partition=tp.partition,
                    current_leader_epoch=partition.leader_epoch,
                    leader_epoch=epoch,
                )
            )
        if not by_topic:
            return
        request = rb(
            replica_id=self.broker_id,
            topics=tuple(rb.make("OffsetForLeaderTopic", topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        response = await conn.send(request)
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                partition = self.partition_for(tp)
                if partition is None or tp not in asked or tp not in self.partitions:
                    continue
                error = ErrorCode(p.error_code)
                if error != ErrorCode.none:
                    self._delay(tp, error)
                    continue
                self._apply_epoch_answer(partition, asked[tp], int(p.leader_epoch), int(p.end_offset))

    def _apply_epoch_answer(self, partition: Partition, asked_epoch: int, epoch: int, end_offset: int) -> None:
        """Truncate after the leader said ``epoch`` ends at ``end_offset`` (we asked for ``asked_epoch``)."""
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            self._truncate_to(partition, partition.high_watermark, "the leader knows no such epoch")
            return
        leo = partition.log.log_end_offset
        target = min(end_offset, leo)
        if epoch != asked_epoch:
            assert partition.epoch_cache is not None
            _, own_end = partition.epoch_cache.end_offset_for(epoch, leo)
            if own_end != UNDEFINED_EPOCH_OFFSET:
                target = min(target, own_end)
        self._truncate_to(partition, target, f"leader epoch {epoch} ends at {end_offset} on broker {self.leader_id}")

    def _truncate_to(self, partition: Partition, offset: int, reason: str) -> None:
        tp = partition.topic_partition
        self.dirty.add(tp)
        if offset < partition.log.log_end_offset:
            log.info(
                "%s: truncating %s-%d from %d to %d (%s)",
                self.name,
                tp.topic,
                tp.partition,
                partition.log.log_end_offset,
                offset,
                reason,
            )
            partition.truncate_to(max(offset, 0))
        else:
            partition.truncate_to(partition.log.log_end_offset)  # drops epochs the leader never had
        state = self.partitions.get(tp)
        if state is not None:
            state.truncating = False

    # --- fetch ---------------------------------------------------------------------------------

    def _throttled(self, tps: list[TopicPartition]) -> set[TopicPartition]:
        """The out-of-sync partitions under the follower throttle (Kafka's shouldFollowerThrottle)."""
        quota = self.config.quota
        out: set[TopicPartition] = set()
        if not quota.throttles_any:
            return out
        for tp in tps:
            partition = self.partition_for(tp)
            if partition is not None and quota.is_throttled(tp) and self.broker_id not in partition.state.isr:
                out.add(tp)
        return out

    async def _fetch(self, conn: KafkaConnection, tps: list[TopicPartition]) -> None:
        throttled = self._throttled(tps)
        if throttled and self.config.quota.is_exceeded():
            tps = [tp for tp in tps if tp not in throttled]
            if not tps:  # only throttled partitions: wait for the rate to fall
                await asyncio.sleep(THROTTLE_PAUSE_S)
                return
        rb = conn.builder(ApiKey.FETCH, 4, FETCH_MAX_VERSION)
        session = self.session
        if session.needs_full:
            data = session.build({tp: self._params(tp) for tp in tps})
        else:  # only what changed: an idle fetcher's request costs nothing per partition
            fetched = set(tps)
            known = session.session_partitions
            changed = (self.dirty & fetched) | (fetched - known.keys())
            data = session.build_changes({tp: self._params(tp) for tp in changed}, list(known.keys() - fetched))
        self.dirty.clear()
        self.generation += 1
        sent_generation = self.generation
        by_topic: dict[str, list[object]] = {}
        for tp, p in data.to_send.items():
            by_topic.setdefault(tp.topic, []).append(
                rb.make(
                    "FetchPartition",
                    partition=tp.partition,
                    current_leader_epoch=p.current_leader_epoch,
                    fetch_offset=p.fetch_offset,
                    last_fetched_epoch=p.last_fetched_epoch,
                    log_start_offset=p.log_start_offset,
                    partition_max_bytes=p.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for tp in data.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        request = rb(
            cluster_id=None,
            replica_id=self.broker_id,
            max_wait=datetime.timedelta(milliseconds=self.config.wait_max_ms),
            min_bytes=self.config.min_bytes,
            max_bytes=self.config.response_max_bytes,
            isolation_level=0,
            session_id=data.session_id,
            session_epoch=data.epoch,
            topics=tuple(rb.make("FetchTopic", topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(
                rb.make("ForgottenTopic", topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()
            ),
            rack_id="",
        )
        try:
            response = await conn.send(request, timeout_ms=self.config.request_timeout_ms + self.config.wait_max_ms)
        except BaseException:
            session.handle_error()
            raise
        error = ErrorCode(getattr(response, "error_code", 0))
        answered = {TopicPartition(t.topic, p.partition_index) for t in response.responses for p in t.partitions}
        self.dirty |= answered  # what the answer changes (an append, a truncation) goes in the next request
        known = session.session_partitions
        sent = {tp: known.get(tp) for tp in answered}  # as the request named them (a reset clears the session)
        if not session.handle_response(data, int(error), int(getattr(response, "session_id", 0)), answered):
            if error in SESSION_ERRORS:  # the next request is a full one, at once
                log.info("%s: fetch session answered %s; sending a full fetch", self.name, error.name)
                return
            if error == ErrorCode.none:
                log.warning("%s: fetch session answer did not match the request; sending a full fetch", self.name)
                return
        if error != ErrorCode.none:
            raise KafkaProtocolError(f"fetch from broker {self.leader_id} failed: {error.name}")
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                partition = self.partition_for(tp)
                if (
                    partition is None
                    or partition.is_leader
                    or not self._unchanged(tp, partition, sent, sent_generation)
                ):
                    continue
                if tp in throttled and p.records is not None:
                    self.config.quota.record(len(p.records))
                self._process(partition, p)

    def _unchanged(
        self,
        tp: TopicPartition,
        partition: Partition,
        sent: dict[TopicPartition, PartitionParams | None],
        sent_generation: int,
    ) -> bool:
        """Whether ``tp`` is fetched as it was when the request went out (Kafka's fetcher drops an
        answer otherwise): same assignment (not added again since), same leader epoch, same log
        end offset as the session last told the leader. A LeaderAndIsr that arrived during the
        long poll made the answer stale: the partition is fetched (after truncating) at once with
        its new epoch instead of backing off on FENCED_LEADER_EPOCH."""
        state = self.partitions.get(tp)
        params = sent.get(tp)
        return (
            state is not None
            and params is not None
            and state.generation < sent_generation
            and partition.leader_epoch == params.current_leader_epoch
            and partition.log.log_end_offset == params.fetch_offset
        )

    def _params(self, tp: TopicPartition) -> PartitionParams:
        """``tp``'s fetch parameters now: at the log end offset, after the latest epoch."""
        partition = self.partition_for(tp)
        assert partition is not None and partition.epoch_cache is not None
        log_ = partition.log
        return PartitionParams(
            fetch_offset=log_.log_end_offset,
            log_start_offset=log_.log_start_offset,
            max_bytes=self.config.max_bytes,
            current_leader_epoch=partition.leader_epoch,
            last_fetched_epoch=partition.epoch_cache.latest_epoch,
        )

    def _process(self, partition: Partition, p: object) -> None:
        tp = partition.topic_partition
        error = ErrorCode(p.error_code)  # type: ignore[attr-defined]
        if error == ErrorCode.offset_out_of_range:
            leader_start = int(p.log_start_offset)  # type: ignore[attr-defined]
            if leader_start > partition.log.log_end_offset:
                log.info("%s: %s-%d restarts at the leader's log start %d", self.name, *tp, leader_start)
                partition.truncate_fully_and_start_at(leader_start)
            else:
                self.partitions[tp].truncating = True
            return
        if error != ErrorCode.none:
            self._delay(tp, error)
            return
        diverging = getattr(p, "diverging_epoch", None)
        if diverging is not None and int(diverging.epoch) >= 0:
            assert partition.epoch_cache is not None
            self._apply_epoch_answer(
                partition, partition.epoch_cache.latest_epoch, int(diverging.epoch), int(diverging.end_offset)
            )
            return
        records = p.records  # type: ignore[attr-defined]
        if records:
            end = 0
            for pos, header in iter_batches(records):
                end = pos + header.batch_length + LOG_OVERHEAD
            if end:
                try:
                    partition.append_records_as_follower(memoryview(records)[:end])
                except KafkaError as exc:
                    log.warning("%s: cannot append to %s-%d: %s; truncating first", self.name, *tp, exc)
                    self.partitions[tp].truncating = True
                    return
                except OSError as exc:
                    if self.config.on_storage_error is None:
                        raise
                    self.config.on_storage_error(partition, exc)
                    return
        partition.update_follower_high_watermark(int(p.high_watermark))  # type: ignore[attr-defined]


class ReplicaFetcherManager:
    """Which fetcher copies which partition; fetchers are created on demand and stopped when empty
    (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        partition_for: Callable[[TopicPartition], Partition | None],
        endpoint_for: Callable[[int], tuple[str, int] | None],
        config: FetcherConfig,
    ) -> None:
        self.broker_id = broker_id
        self.partition_for = partition_for
        self.endpoint_for = endpoint_for
        self.config = config
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int]] = {}
        self.closed = False
        """Set by :meth:`shutdown`: a broker going away fetches nothing more."""
        self._idle_check_pending = False
        self._idle_shutdown: asyncio.Task[None] | None = None

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:
        """Fetch ``tp`` from ``leader_id`` (truncating first); replaces any earlier assignment.
        Does nothing once the manager is shut down."""
        self.remove_partition(tp)
        if self.closed:
            return
        key = (leader_id, hash(tp) % max(1, self.config.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(
                self.broker_id, leader_id, key[1], self.partition_for, self.endpoint_for, self.config
            )
        fetcher.add(tp)
        self._assigned[tp] = key

    def mark_changed(self, tp: TopicPartition) -> None:
        """``tp``'s log changed outside its fetcher (retention moved its log start)."""
        key = self._assigned.get(tp)
        fetcher = self.fetchers.get(key) if key is not None else None
        if fetcher is not None:
            fetcher.mark_changed(tp)

    @property
    def assigned(self) -> dict[TopicPartition, tuple[int, int]]:
        """Partition -> (leader id, fetcher index) being fetched."""
        return self._assigned

    def remove_partition(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp``; a fetcher left empty is stopped soon (:meth:`shutdown_idle_fetchers`)."""
        key = self._assigned.pop(tp, None)
        fetcher = self.fetchers.get(key) if key is not None else None
        if fetcher is not None:
            fetcher.remove(tp)
            if not fetcher.partitions:
                self._schedule_idle_check()

    def _schedule_idle_check(self) -> None:
        self._idle_check_pending = True
        if self._idle_shutdown is None or self._idle_shutdown.done():
            self._idle_shutdown = asyncio.get_running_loop().create_task(
                self._shutdown_idle_soon(), name=f"replica-fetchers-{self.broker_id}-idle-shutdown"
            )

    async def _shutdown_idle_soon(self) -> None:
        while self._idle_check_pending:
            self._idle_check_pending = False
            await asyncio.sleep(0)  # after the caller's synchronous changes (one LeaderAndIsr)
            await self.shutdown_idle_fetchers()

    async def shutdown_idle_fetchers(self) -> None:
        """Stop the fetchers that have no partition left and close their connections (Kafka's
        ``shutdownIdleFetcherThreads``)."""
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions and self.fetchers.get(key) is fetcher:
                del self.fetchers[key]
                await fetcher.stop()

    async def wait_idle_shutdown(self) -> None:
        """Wait until the pending idle-fetcher check (if any) has run."""
        task = self._idle_shutdown
        if task is not None and not task.done():
            await asyncio.shield(task)

    async def shutdown(self) -> None:
        """Stop every fetcher for good (controlled shutdown, broker stop)."""
        self.closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._assigned.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        await self.wait_idle_shutdown()
