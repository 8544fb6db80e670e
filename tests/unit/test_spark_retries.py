"""Retries of the ``odradek`` Spark source and sink, with the failing call injected (no sockets).

Spark's ``KafkaOffsetReaderAdmin.withRetries``: ``fetchOffset.numRetries`` attempts,
``fetchOffset.retryIntervalMs`` apart, a fresh client between attempts; then the last error.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from odradek.spark.driver import (
    BrokerUnavailableError,
    DriverClient,
    OffsetFetchError,
    client_config,
    describe_partitions,
    is_transient,
    retry_until,
    with_retries,
)
from odradek.spark.options import ClientSettings
from odradek.spark.transactional import retry_retriable


def _kafka(code: int, retriable: bool = False) -> KafkaException:
    """An error as librdkafka raises it; ``retriable`` is the flag its transactional API sets."""
    return KafkaException(KafkaError(code, retriable=retriable))


class Flaky:
    """Fails with ``errors`` in turn, then returns ``result``."""

    def __init__(self, errors: list[BaseException], result: Any = "ok") -> None:
        self.errors = list(errors)
        self.result = result
        self.calls = 0

    def __call__(self, *_: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def test_transient_errors() -> None:
    assert is_transient(_kafka(KafkaError.LEADER_NOT_AVAILABLE))
    assert is_transient(_kafka(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert is_transient(_kafka(KafkaError._TRANSPORT))
    assert is_transient(TimeoutError("slow"))
    assert not is_transient(BrokerUnavailableError("all brokers down"))
    assert not is_transient(_kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert not is_transient(ValueError("bad option"))


def test_retries_until_success_with_a_reset_between_attempts() -> None:
    call = Flaky([_kafka(KafkaError.LEADER_NOT_AVAILABLE), TimeoutError("slow")])
    slept: list[float] = []
    resets: list[int] = []
    result = with_retries(
        "latest offsets", call, attempts=3, interval_ms=250, on_retry=lambda: resets.append(1), sleep=slept.append
    )
    assert result == "ok"
    assert call.calls == 3
    assert slept == [0.25, 0.25]
    assert len(resets) == 2


def test_gives_up_after_the_attempts_with_the_exhausted_error() -> None:
    call = Flaky([_kafka(KafkaError.LEADER_NOT_AVAILABLE)] * 5)
    slept: list[float] = []
    with pytest.raises(OffsetFetchError, match=r"^gave up: .*Leader not available"):
        with_retries(
            "latest offsets",
            call,
            attempts=3,
            interval_ms=1000,
            exhausted=lambda exc: OffsetFetchError(f"gave up: {exc}"),
            sleep=slept.append,
        )
    assert call.calls == 3
    assert slept == [1.0, 1.0]


def test_zero_retries_still_attempts_once_and_reraises() -> None:
    call = Flaky([TimeoutError("slow")])
    with pytest.raises(TimeoutError):
        with_retries("x", call, attempts=0, interval_ms=10, sleep=lambda _: None)
    assert call.calls == 1


def test_non_transient_errors_are_not_retried() -> None:
    call = Flaky([BrokerUnavailableError("down"), "never"])
    with pytest.raises(BrokerUnavailableError):
        with_retries("x", call, attempts=5, interval_ms=10, sleep=lambda _: None)
    assert call.calls == 1


def _metadata() -> Any:
    part = SimpleNamespace
    return SimpleNamespace(
        brokers={1: SimpleNamespace(host="127.0.0.1", port=9092)},
        topics={
            "t": SimpleNamespace(partitions={0: part(leader=-1, replicas=[2]), 1: part(leader=1, replicas=[1, 2])})
        },
    )


def test_describe_partitions_names_leaders_and_dead_replicas() -> None:
    text = describe_partitions(_metadata(), [("t", 1), ("t", 0), ("gone", 0)])
    assert text == (
        "gone-0: not in the cluster's metadata; "
        "t-0: no leader, replicas broker 2 (not alive); "
        "t-1: leader broker 1 (127.0.0.1:9092), replicas broker 1 (127.0.0.1:9092), broker 2 (not alive)"
    )


def _settings(**params: str) -> ClientSettings:
    return ClientSettings("127.0.0.1:1", {"bootstrap.servers": "127.0.0.1:1", **params}, 5000, 2, 0)


class _Admin:
    def list_topics(self, timeout: float) -> Any:
        return _metadata()


def test_driver_client_error_names_partition_broker_and_options() -> None:
    client = DriverClient(_settings())
    built: list[int] = []

    def fresh_admin() -> Any:
        built.append(1)
        return _Admin()

    client._client = fresh_admin  # type: ignore[method-assign]
    call = Flaky([_kafka(KafkaError.LEADER_NOT_AVAILABLE)] * 3)
    with pytest.raises(OffsetFetchError) as info:
        client._with_retries("latest offsets of [t-0]", call, [("t", 0)])
    message = str(info.value)
    assert call.calls == 2
    assert "after 2 attempt(s) 0 ms apart" in message
    assert "t-0: no leader, replicas broker 2 (not alive)" in message
    assert "fetchOffset.numRetries" in message and "fetchOffset.retryIntervalMs" in message
    assert "127.0.0.1:1" in message


def test_driver_client_non_retriable_kafka_error_fails_at_once() -> None:
    client = DriverClient(_settings())
    call = Flaky([_kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED)])
    with pytest.raises(RuntimeError, match="Failed to get latest offsets: ") as info:
        client._with_retries("latest offsets", call, [("t", 0)])
    assert not isinstance(info.value, OffsetFetchError)
    assert call.calls == 1


def test_java_timeouts_map_to_librdkafka() -> None:
    settings = _settings(**{"request.timeout.ms": "7000", "delivery.timeout.ms": "9000"})
    admin = client_config(settings, "admin")
    consumer = client_config(settings, "consumer")
    producer = client_config(settings, "producer")
    assert admin["socket.timeout.ms"] == "7000" and "request.timeout.ms" not in admin
    assert consumer["socket.timeout.ms"] == "7000" and "request.timeout.ms" not in consumer
    assert producer["request.timeout.ms"] == "7000" and "socket.timeout.ms" not in producer
    assert producer["message.timeout.ms"] == "9000" and "delivery.timeout.ms" not in producer
    assert "delivery.timeout.ms" not in admin and "message.timeout.ms" not in consumer


def test_transaction_calls_repeat_while_retriable_within_the_deadline() -> None:
    now = [0.0]
    call = Flaky([_kafka(KafkaError.COORDINATOR_NOT_AVAILABLE, True), _kafka(KafkaError.NOT_COORDINATOR, True)])
    result = retry_retriable("commit_transaction", call, 10.0, clock=lambda: now[0], sleep=lambda s: None)
    assert result == "ok" and call.calls == 3


def test_transaction_calls_stop_at_the_deadline() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 4.0

    call = Flaky([_kafka(KafkaError.COORDINATOR_NOT_AVAILABLE, True)] * 10)
    with pytest.raises(KafkaException):
        retry_retriable("commit_transaction", call, 10.0, clock=lambda: now[0], sleep=sleep)
    assert call.calls == 3  # at 0, 4 and 8 s; the next would start at 12 s: the last error propagates


def test_transaction_calls_do_not_repeat_non_retriable_errors() -> None:
    call = Flaky([_kafka(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "never"])
    with pytest.raises(KafkaException):
        retry_retriable("init_transactions", call, 1e9, clock=lambda: 0.0, sleep=lambda s: None)
    assert call.calls == 1


def test_transaction_calls_do_not_repeat_an_error_that_requires_an_abort() -> None:
    error = KafkaException(KafkaError(KafkaError._TIMED_OUT, retriable=True, txn_requires_abort=True))
    call = Flaky([error, "never"])
    with pytest.raises(KafkaException):
        retry_retriable("commit_transaction", call, 1e9, clock=lambda: 0.0, sleep=lambda s: None)
    assert call.calls == 1


def test_one_attempt_retries_a_moving_leader_within_the_api_timeout() -> None:
    """Java's admin retries retriable errors until default.api.timeout.ms; each call gets the
    time left, and the client is dropped between calls (fresh metadata)."""
    now = [0.0]
    timeouts: list[float] = []
    resets: list[int] = []

    def call(timeout_s: float) -> str:
        timeouts.append(timeout_s)
        if len(timeouts) < 3:
            raise _kafka(KafkaError.NOT_LEADER_FOR_PARTITION)
        return "ok"

    def sleep(seconds: float) -> None:
        now[0] += seconds + 1.0  # the failed call took a second

    result = retry_until(
        "latest offsets",
        call,
        30.0,
        backoff_s=0.5,
        on_retry=lambda: resets.append(1),
        clock=lambda: now[0],
        sleep=sleep,
    )
    assert result == "ok"
    assert timeouts == [30.0, 28.5, 27.0]
    assert len(resets) == 2


def test_one_attempt_ends_at_its_deadline_with_the_last_error() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 2.0

    call = Flaky([_kafka(KafkaError.LEADER_NOT_AVAILABLE)] * 100)
    with pytest.raises(KafkaException):
        retry_until("latest offsets", call, 5.0, backoff_s=0.1, clock=lambda: now[0], sleep=sleep)
    assert call.calls == 3  # at 0, 2 and 4 s; the next would start at 6 s, past the deadline


# ----------------------------------------------------------------------------- executor reads
class _Message:
    def __init__(self, offset: int, error: KafkaError | None = None) -> None:
        self._offset = offset
        self._error = error

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v%d" % self._offset

    def headers(self) -> None:
        return None


class _Consumer:
    """Answers ``consume`` from a script of message lists (then nothing); the partition is led by
    nobody, replicas broker 2 (dead)."""

    def __init__(self, script: list[list[_Message]]) -> None:
        self.script = list(script)

    def assign(self, partitions: Any) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        return self.script.pop(0) if self.script else []

    def list_topics(self, topic: str, timeout: float) -> Any:
        return _metadata()


def _read(monkeypatch: pytest.MonkeyPatch, consumer: _Consumer, poll_timeout_ms: int) -> list[int]:
    from odradek.spark import fetch
    from odradek.spark.offsets import OffsetRange
    from odradek.spark.options import parse_source_options

    monkeypatch.setattr(fetch, "_acquire", lambda conf: (consumer, ()))
    monkeypatch.setattr(fetch, "_release", lambda consumer, key, healthy: None)
    options = parse_source_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": "t",
            "kafkaconsumer.polltimeoutms": str(poll_timeout_ms),
        },
        "batch",
    )
    batches = fetch.read_range(options, OffsetRange("t", 0, 0, 3), "g")
    return [offset for batch in batches for offset in batch.column("offset").to_pylist()]


def test_a_read_rides_out_transient_errors_of_a_leader_change(monkeypatch: pytest.MonkeyPatch) -> None:
    moving = [
        [_Message(0)],
        [_Message(-1, KafkaError(KafkaError._TRANSPORT))],
        [_Message(-1, KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))],
        [_Message(1), _Message(2)],
    ]
    assert _read(monkeypatch, _Consumer(moving), 5_000) == [0, 1, 2]


def test_a_read_without_a_leader_fails_after_the_poll_timeout_naming_the_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    down = [[_Message(0)], [_Message(-1, KafkaError(KafkaError._TRANSPORT, "Connection refused"))]]
    with pytest.raises(TimeoutError) as info:
        _read(monkeypatch, _Consumer(down), 300)
    message = str(info.value)
    assert "Cannot fetch records in [1, 3) of t-0 within 300 ms" in message
    assert "Partition t-0: no leader, replicas broker 2 (not alive)" in message
    assert "Connection refused" in message
    assert "kafkaConsumer.pollTimeoutMs" in message


def test_a_read_fails_at_once_on_a_non_retriable_error(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = [[_Message(-1, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))]]
    with pytest.raises(RuntimeError, match="Failed to fetch t-0 at offset 0"):
        _read(monkeypatch, _Consumer(denied), 60_000)
