"""Driver-side broker access for the ``odradek`` source and sink: metadata, offsets, group offsets.

Runs in the driver's Python workers only: the planner worker (batch reads, writer set-up) and the
long-lived stream-runner worker (``initialOffset``/``latestOffset``/``partitions``/``commit``).
It uses confluent-kafka's ``AdminClient``, so it works against any Kafka cluster.

**Every call is bounded.** A call gives up after ``kafka.default.api.timeout.ms`` (default 30 s)
with a ``TimeoutError``; and when librdkafka reports every broker down for longer than
``fetchOffset.numRetries`` x ``fetchOffset.retryIntervalMs`` (3 x 1 s by default) the call stops
early with :class:`BrokerUnavailableError`, naming the bootstrap servers and the socket error.

**Retries, as Spark's ``KafkaOffsetReaderAdmin.withRetries``.** Partition discovery and every
offset look-up (earliest, latest, by timestamp) make ``fetchOffset.numRetries`` attempts (default
3) ``fetchOffset.retryIntervalMs`` apart (default 1000 ms). Between attempts the admin client is
dropped and built again, so the next attempt starts from fresh metadata (a partition whose leader
moved is asked at its new leader). Transient failures are retried: retriable Kafka errors (no
leader, not leader, transport, request timed out) and a call timing out; configuration,
authorization and "every broker down" errors are not (the last already spent the retry budget).
After the last attempt an :class:`OffsetFetchError` names the partitions, the broker(s) that
lead or host them as the cluster's metadata says, the last error, and the options to raise.
So a lookup takes at most ``numRetries`` x (``kafka.default.api.timeout.ms`` + ``retryIntervalMs``).

A :class:`DriverClient` holds a live client: never pickle it (readers drop it in
``__getstate__``). Not thread-safe; Spark calls a reader from one thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from odradek.spark.kafka_security import librdkafka_params
from odradek.spark.offsets import PartitionOffsets, TopicPartition, format_tps
from odradek.spark.options import Assign, ClientSettings, Strategy, Subscribe

__all__ = [
    "INTERNAL_TOPICS",
    "BrokerUnavailableError",
    "DriverClient",
    "OffsetFetchError",
    "client_config",
    "describe_partitions",
    "is_transient",
    "retry_until",
    "with_retries",
]

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# librdkafka properties that only one kind of client understands; dropped for the others so the
# client does not warn about them.
_CONSUMER_ONLY = re.compile(
    r"^(group\.|isolation\.level$|auto\.offset\.reset$|enable\.auto\.|auto\.commit\.|fetch\.|"
    r"max\.poll\.|session\.timeout|heartbeat\.|partition\.assignment|queued\.|check\.crcs$|"
    r"enable\.partition\.eof$|allow\.auto\.create\.topics$|coordinator\.)"
)
_PRODUCER_ONLY = re.compile(
    r"^(acks$|request\.required\.acks$|linger\.ms$|queue\.buffering\.|batch\.|compression\.|"
    r"partitioner$|enable\.idempotence$|message\.timeout\.ms$|delivery\.timeout\.ms$|transaction|"
    r"retries$|message\.send\.max\.retries$|sticky\.partitioning)"
)

T = TypeVar("T")


def client_config(settings: ClientSettings, role: str) -> dict[str, Any]:
    """librdkafka configuration for an ``admin``, ``consumer`` or ``producer`` client.

    Starts from the user's ``kafka.*`` options (Java's security keys translated to librdkafka's,
    :func:`odradek.spark.kafka_security.librdkafka_params`), drops the properties the role does not
    understand, and quiets librdkafka's own stderr logging (``log_level`` 2) unless the user set
    it; connection errors still reach our error callback.

    Java's timeouts map to librdkafka's: ``request.timeout.ms`` is a producer property in
    librdkafka, so for the admin client and consumers it becomes ``socket.timeout.ms`` (the bound of
    one request there) unless that is set; a producer's ``delivery.timeout.ms`` becomes
    ``message.timeout.ms`` (librdkafka's name for the same bound), so :class:`~odradek.spark.sink.Delivery`
    reads one key.
    """
    conf: dict[str, Any] = {}
    params = librdkafka_params(settings.kafka_params)
    for key, value in params.items():
        if role != "consumer" and _CONSUMER_ONLY.match(key):
            continue
        if role != "producer" and (_PRODUCER_ONLY.match(key) or key == "request.timeout.ms"):
            continue
        conf[key] = value
    if role == "producer" and "delivery.timeout.ms" in conf:
        conf["message.timeout.ms"] = conf.pop("delivery.timeout.ms")
    if role != "producer" and "request.timeout.ms" in params:
        conf.setdefault("socket.timeout.ms", params["request.timeout.ms"])
    conf["bootstrap.servers"] = settings.bootstrap_servers
    conf.setdefault("log_level", 2)
    return conf


class BrokerUnavailableError(ConnectionError):
    """No broker of ``kafka.bootstrap.servers`` could be reached within the retry budget."""


class OffsetFetchError(RuntimeError):
    """Partition discovery or an offset look-up still failed after ``fetchOffset.numRetries``
    attempts; the message names the partitions, their brokers, the last error and the options."""


# librdkafka codes worth another attempt with fresh metadata, besides what ``retriable()`` says.
_TRANSIENT_CODE_NAMES = (
    "_TRANSPORT",
    "_TIMED_OUT",
    "_MSG_TIMED_OUT",
    "_WAIT_COORD",
    "_UNKNOWN_PARTITION",
    "_NOENT",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "NOT_LEADER_OR_FOLLOWER",
    "REQUEST_TIMED_OUT",
    "UNKNOWN_TOPIC_OR_PART",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_ENOUGH_REPLICAS",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",
)


def transient_codes() -> frozenset[int]:
    """The librdkafka error codes :func:`is_transient` retries (names missing from the installed
    confluent-kafka are skipped)."""
    from confluent_kafka import KafkaError

    return frozenset(getattr(KafkaError, name) for name in _TRANSIENT_CODE_NAMES if hasattr(KafkaError, name))


def kafka_error_of(exc: BaseException) -> Any:
    """The ``KafkaError`` a ``KafkaException`` carries, or None."""
    error = exc.args[0] if exc.args else None
    return error if error is not None and hasattr(error, "code") else None


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt, with fresh metadata, may succeed: a timeout, or a Kafka error that
    is retriable (leader moving, coordinator moving, transport). Never for
    :class:`BrokerUnavailableError` (it already spent the retry budget), configuration, auth or
    programming errors."""
    if isinstance(exc, BrokerUnavailableError):
        return False
    if isinstance(exc, TimeoutError):
        return True
    error = kafka_error_of(exc)
    if error is None:
        return False
    if hasattr(error, "fatal") and error.fatal():
        return False
    if hasattr(error, "retriable") and error.retriable():
        return True
    return bool(error.code() in transient_codes())


def with_retries(
    what: str,
    call: Callable[[], T],
    *,
    attempts: int,
    interval_ms: int,
    on_retry: Callable[[], None] = lambda: None,
    exhausted: Callable[[BaseException], Exception] | None = None,
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, attempted up to ``attempts`` times (at least once) while it fails transiently.

    Spark's ``withRetries``: between attempts, log a warning, sleep ``interval_ms`` and call
    ``on_retry`` (drop the client so the next attempt refreshes metadata). A non-transient error
    propagates at once. After the last attempt, raises ``exhausted(last_error)`` (default: the
    last error itself). Runs on the caller's thread; the total wait is bounded by ``attempts``
    x (one call's own bound + ``interval_ms``).
    """
    total = max(1, attempts)
    for attempt in range(1, total + 1):
        try:
            return call()
        except Exception as exc:
            if not transient(exc):
                raise
            if attempt == total:
                if exhausted is None:
                    raise
                raise exhausted(exc) from exc
            log.warning("Error in attempt %d getting %s (%s); retrying in %d ms", attempt, what, exc, interval_ms)
            sleep(interval_ms / 1000)
            on_retry()
    raise AssertionError("unreachable")


def retry_until(
    what: str,
    call: Callable[[float], T],
    deadline: float,
    *,
    transient: Callable[[BaseException], bool] = is_transient,
    backoff_s: float = 0.1,
    min_timeout_s: float = 0.05,
    on_retry: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call(timeout_s)`` again, ``backoff_s`` apart, while it fails ``transient``-ly and
    ``deadline`` (a ``clock`` value) has not passed: what Java's clients do within
    ``default.api.timeout.ms`` (``retry.backoff.ms`` apart) before an operation fails. Each call
    gets the time left (at least ``min_timeout_s``); ``on_retry`` runs before the next call (drop
    the client for fresh metadata). Other errors, and a transient one past the deadline, propagate.
    """
    while True:
        try:
            return call(max(min_timeout_s, deadline - clock()))
        except Exception as exc:
            if not transient(exc) or clock() + backoff_s >= deadline:
                raise
            log.info("%s failed (%s); trying again", what, exc)
            sleep(backoff_s)
            if clock() >= deadline:
                raise
            on_retry()


def _broker_text(broker_id: int, brokers: Mapping[int, Any]) -> str:
    broker = brokers.get(broker_id)
    if broker is None:
        return f"broker {broker_id} (not alive)"
    return f"broker {broker_id} ({broker.host}:{broker.port})"


def describe_partitions(metadata: Any, tps: Iterable[TopicPartition]) -> str:
    """Who leads and hosts each partition, from librdkafka ``ClusterMetadata`` (``topics`` ->
    ``partitions`` -> ``leader``/``replicas``; ``brokers`` -> ``host``/``port``, live brokers
    only), e.g. ``"t-0: no leader, replicas broker 2 (not alive)"``. A leader of -1 means none."""
    parts = []
    for topic, partition in sorted(set(tps)):
        described = metadata.topics.get(topic)
        pm = described.partitions.get(partition) if described is not None else None
        if pm is None:
            parts.append(f"{topic}-{partition}: not in the cluster's metadata")
            continue
        replicas = ", ".join(_broker_text(r, metadata.brokers) for r in pm.replicas) or "none"
        if pm.leader < 0:
            parts.append(f"{topic}-{partition}: no leader, replicas {replicas}")
        else:
            parts.append(
                f"{topic}-{partition}: leader {_broker_text(pm.leader, metadata.brokers)}, replicas {replicas}"
            )
    return "; ".join(parts)


class DriverClient:
    """Metadata and offset look-ups for one query (see the module docstring for timeouts)."""

    def __init__(self, settings: ClientSettings) -> None:
        self._settings = settings
        self._admin: Any = None
        self._down_since: float | None = None
        self._last_error = ""
        self._fatal_error = ""

    # ------------------------------------------------------------------------------ plumbing
    def _client(self) -> Any:
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            conf = client_config(self._settings, "admin")
            conf["error_cb"] = self._on_error
            try:
                self._admin = AdminClient(conf)
            except (KafkaException, ValueError, TypeError) as exc:
                raise ValueError(f"Invalid 'kafka.*' option for the Kafka client (librdkafka): {exc}") from None
        return self._admin

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        code = error.code()
        self._last_error = error.str()
        if code in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            self._fatal_error = error.str()
        elif code in (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE) and self._down_since is None:
            self._down_since = time.monotonic()

    def _check_reachable(self) -> None:
        if self._fatal_error:
            raise BrokerUnavailableError(
                f"Cannot use the Kafka cluster at '{self._settings.bootstrap_servers}': {self._fatal_error}"
            )
        grace = self._settings.fetch_offset_num_retries * self._settings.fetch_offset_retry_interval_ms / 1000
        if self._down_since is not None and time.monotonic() - self._down_since >= grace:
            raise BrokerUnavailableError(
                f"Cannot connect to the Kafka cluster at '{self._settings.bootstrap_servers}' "
                f"(option kafka.bootstrap.servers): all brokers down for {grace:.1f}s; last error: "
                f"{self._last_error}"
            )

    def _deadline(self, timeout_ms: int | None = None) -> float:
        return time.monotonic() + (timeout_ms or self._settings.api_timeout_ms) / 1000

    def _timeout_error(self, what: str, timeout_ms: int | None = None) -> TimeoutError:
        detail = f"; last client error: {self._last_error}" if self._last_error else ""
        return TimeoutError(
            f"Timed out after {timeout_ms or self._settings.api_timeout_ms} ms waiting for {what} from the "
            f"Kafka cluster at '{self._settings.bootstrap_servers}'{detail} (raise kafka.default.api.timeout.ms "
            "if the cluster is just slow)"
        )

    def _wait(
        self, futures: Mapping[T, concurrent.futures.Future[Any]], what: str, timeout_ms: int | None = None
    ) -> dict[T, Any]:
        """Wait for admin futures, serving callbacks so an unreachable cluster fails early."""
        deadline = self._deadline(timeout_ms)
        pending = set(futures.values())
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.05)
            self._client().poll(0)
            self._check_reachable()
            if pending and time.monotonic() > deadline:
                raise self._timeout_error(what, timeout_ms)
        results = {key: future.result() for key, future in futures.items()}
        self._down_since = None
        return results

    def _with_retries(self, what: str, call: Callable[[], T], tps: Iterable[TopicPartition] = ()) -> T:
        """``call`` within ``fetchOffset.numRetries``/``retryIntervalMs`` (:func:`with_retries`);
        a new admin client between attempts; a non-transient Kafka error becomes a
        ``RuntimeError("Failed to get <what>: ...")`` at once."""
        settings = self._settings
        wanted = sorted(set(tps))

        def exhausted(exc: BaseException) -> Exception:
            where = f" {self._leaders(wanted)}." if wanted else ""
            return OffsetFetchError(
                f"Failed to get {what} from the Kafka cluster at '{settings.bootstrap_servers}' after "
                f"{max(1, settings.fetch_offset_num_retries)} attempt(s) {settings.fetch_offset_retry_interval_ms} ms "
                f"apart; last error: {exc}.{where} Raise fetchOffset.numRetries or fetchOffset.retryIntervalMs "
                "(and kafka.default.api.timeout.ms, the bound of one attempt) to wait longer for a leader."
            )

        try:
            return with_retries(
                what,
                call,
                attempts=settings.fetch_offset_num_retries,
                interval_ms=settings.fetch_offset_retry_interval_ms,
                on_retry=self._reset,
                exhausted=exhausted,
            )
        except OffsetFetchError:
            raise
        except Exception as exc:
            error = kafka_error_of(exc)
            if error is None:
                raise
            raise RuntimeError(f"Failed to get {what}: {error}") from None

    @property
    def _backoff_s(self) -> float:
        """Java's ``retry.backoff.ms`` (``kafka.retry.backoff.ms``, default 100 ms)."""
        try:
            return int(self._settings.kafka_params.get("retry.backoff.ms", "100")) / 1000
        except ValueError:
            return 0.1

    def _reset(self) -> None:
        """Drop the admin client: the next call builds one and fetches fresh metadata."""
        self._admin = None
        self._down_since = None

    def _leaders(self, tps: list[TopicPartition]) -> str:
        """Best effort: who leads and hosts ``tps`` now (one metadata request, at most 5 s)."""
        try:
            timeout_s = min(5.0, self._settings.api_timeout_ms / 1000)
            metadata = self._client().list_topics(timeout=timeout_s)
            return "Partitions: " + describe_partitions(metadata, tps)
        except Exception as exc:
            return f"The leaders of {format_tps(tps)} are unknown (no metadata: {exc})"

    def close(self) -> None:
        """Drop the client (librdkafka closes it when collected)."""
        self._admin = None

    # ------------------------------------------------------------------------------ metadata
    def topics(self) -> dict[str, list[int]]:
        """Every topic the cluster reports, with its partition numbers (sorted); retried as the
        offset look-ups are (module docstring)."""
        return self._with_retries("metadata", self._topics_once)

    def _topics_once(self) -> dict[str, list[int]]:
        from confluent_kafka import KafkaError, KafkaException

        deadline = self._deadline()
        while True:
            slice_s = max(0.05, min(1.0, deadline - time.monotonic()))
            try:
                metadata = self._client().list_topics(timeout=slice_s)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                code = error.code() if error is not None and hasattr(error, "code") else None
                if code not in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
                    raise RuntimeError(f"Failed to get metadata: {error}") from None
                self._client().poll(0)
                self._check_reachable()
                if time.monotonic() > deadline:
                    raise self._timeout_error("metadata") from None
                continue
            self._down_since = None
            return {
                name: sorted(topic.partitions)
                for name, topic in metadata.topics.items()
                if topic.partitions or topic.error is None
            }

    def check_connectivity(self) -> None:
        """One metadata round trip: fails fast (see module docstring) when the cluster is unreachable."""
        self.topics()

    def assigned_partitions(self, strategy: Strategy) -> list[TopicPartition]:
        """Partitions the subscription covers now, sorted.

        ``subscribe``: partitions of the listed topics that exist; ``subscribePattern``: of every
        non-internal topic the pattern fully matches; ``assign``: exactly the given partitions
        (no metadata call).
        """
        if isinstance(strategy, Assign):
            return sorted(strategy.partitions)
        topics = self.topics()
        if isinstance(strategy, Subscribe):
            names: Iterable[str] = [t for t in strategy.topics if t in topics]
        else:
            pattern = re.compile(strategy.pattern)
            names = [t for t in topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t)]
        return sorted((name, p) for name in set(names) for p in topics[name])

    # ------------------------------------------------------------------------------- offsets
    def _list_offsets(self, specs: Mapping[TopicPartition, Any], what: str) -> PartitionOffsets:
        if not specs:
            return {}
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        isolation = (
            IsolationLevel.READ_COMMITTED
            if self._settings.kafka_params.get("isolation.level", "").lower() == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        keyed = {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()}

        def once(timeout_s: float) -> PartitionOffsets:
            futures = self._client().list_offsets(keyed, isolation_level=isolation, request_timeout=timeout_s)
            results = self._wait(futures, what, int(timeout_s * 1000))
            return {(tp.topic, tp.partition): int(info.offset) for tp, info in results.items()}

        def call() -> PartitionOffsets:
            # one attempt: Java's admin retries a moving leader within default.api.timeout.ms
            return retry_until(what, once, self._deadline(), backoff_s=self._backoff_s, on_retry=self._reset)

        return self._with_retries(f"{what} of {format_tps(specs)}", call, specs)

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """Log start offset of every partition."""
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps}, "earliest offsets")

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """End offset of every partition: high watermark, or last stable offset when
        ``kafka.isolation.level=read_committed``."""
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps}, "latest offsets")

    def offsets_for_timestamps(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        """First offset whose timestamp is >= the given one (ms), or ``-1`` where none is."""
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        specs = {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()}
        return self._list_offsets(specs, "offsets by timestamp")

    # ------------------------------------------------------------------------- group offsets
    def committed(self, group: str, tps: Iterable[TopicPartition], timeout_ms: int | None = None) -> PartitionOffsets:
        """The group's committed offsets for ``tps``; partitions without one are left out."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        request = [ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(t, p) for t, p in sorted(tps)])]
        timeout_ms = timeout_ms or self._settings.api_timeout_ms
        futures = self._client().list_consumer_group_offsets(request, request_timeout=timeout_ms / 1000)
        result = self._wait(futures, f"committed offsets of group '{group}'", timeout_ms)[group]
        return {(tp.topic, tp.partition): int(tp.offset) for tp in result.topic_partitions if tp.offset >= 0}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], timeout_ms: int | None = None) -> None:
        """Store ``offsets`` as the group's committed offsets (the group must have no members)."""
        if not offsets:
            return
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        partitions = [KafkaTopicPartition(t, p, off) for (t, p), off in sorted(offsets.items()) if off >= 0]
        timeout_ms = timeout_ms or self._settings.api_timeout_ms
        futures = self._client().alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=timeout_ms / 1000
        )
        self._wait(futures, f"offset commit of group '{group}'", timeout_ms)
