"""Client benchmark: confluent-kafka (librdkafka) producing to and consuming from one broker.

The broker runs in its own process (``bench/common.py``): odradek, or the peer Tansu with its
in-memory storage. One JSON document goes to stdout; progress to stderr.

Workloads, each on a fresh topic of ``--partitions`` partitions (replication 1):

- **produce**: N messages of S bytes (random, no key, partition ``i % partitions``), ``acks`` 1
  or all, ``linger.ms`` 5, ``batch.size`` 1 MB, no compression, as fast as the client can call
  ``produce()``; then ``flush()``. One message is produced and flushed first (connection and
  metadata set-up is not timed).
  With ``--producers K`` the messages are split over K client processes (each its own
  librdkafka producer, message ``i`` from process ``i % K``), released together; the rate runs
  to the last process's end of ``flush()``. One Python thread calling ``produce()`` tops out near
  a million messages per second, so at 100 B it is this option that lets the broker show.
- **consume**: read the whole topic back from offset 0 (``assign``, no group), until all N
  messages arrived. librdkafka's consumer back-off is overridden (``queued.min.messages`` 10M,
  ``queued.max.messages.kbytes`` 2 GB, ``fetch.queue.backoff.ms`` 0, ``fetch.wait.max.ms`` 100)
  so the pre-fetcher never pauses and the figure is bound by the broker, not by the client's queue.
  Fetch sizes are librdkafka's defaults (``fetch.max.bytes`` 50 MiB, ``max.partition.fetch.bytes``
  1 MiB; the latter can be set with ``--max-partition-fetch-bytes``).
- **fixed rate**: ``--rate`` msg/s of ``--rate-size`` bytes for ``--rate-seconds`` s, acks=all,
  paced in 1 ms steps; the delivery latency distribution at that load.

Figures:

- ``msgs_per_s`` / ``mb_per_s``: messages (payload MB, 10^6 bytes) per wall-clock second, from
  the first ``produce()`` to the end of ``flush()`` (produce), or from the first consumed batch
  to the last message (consume). librdkafka waits about 0.5 s after ``assign()`` before it asks
  for the start offsets, with any broker, so that start-up is reported apart: ``first_message_s``
  (from ``assign()`` to the first message) and ``seconds_total``.
- ``latency_ms``: delivery latency, librdkafka's ``msg.latency()``: from the ``produce()`` call
  to the broker's acknowledgement, linger time included (p50/p99/p99.9/max); in the throughput
  runs of every 16th message (the others carry no callback, which keeps the client's Python
  thread from being the bottleneck; the consume phase reads every message back), in the
  fixed-rate run of every message.
  In the throughput runs it is dominated by queueing in the client; the fixed-rate run is the
  latency figure.
- ``client_thread_busy`` (produce): CPU time of the benchmark's own Python thread (the
  ``produce()`` loop and the delivery callbacks) over the elapsed time. Near 1.0 the cell is
  bound by that thread, whichever broker answers.
- ``producers_cpu_us_per_msg`` and ``machine_busy_cores`` (produce with ``--producers``): the
  client processes' CPU per message (librdkafka's threads included) and how many of the
  machine's cores were busy during the run (``/proc/stat``). With the cores saturated, no broker
  can make the clients faster than ``cores / producers_cpu_us_per_msg``: that ceiling, against
  the peer's rate, bounds what any broker could show in the cell.
- ``broker_cpu_s``: CPU seconds (user + system) the broker process used during the workload;
  ``broker_cpu_us_per_msg`` the same per message; for the fixed rate, ``broker_cpu_pct`` is the
  broker's CPU use in percent of one core.
- ``produce_rtt_ms`` / ``fetch_rtt_ms``: round trip of the client's requests to the broker (from
  librdkafka's statistics, mostly Produce or Fetch requests): ``mean`` over all of them and the
  largest per-200 ms-interval ``p99``. librdkafka keeps one Fetch in flight per broker, so the
  consume rate follows the fetch round trip.

    python bench/client_bench.py [--broker odradek|tansu] [--messages 200000] [--sizes 100,1024]
        [--acks 1,all] [--partitions 4] [--rate 10000] [--rate-seconds 10] [--rate-size 1024]
    python bench/client_bench.py --bootstrap 127.0.0.1:9092 [--broker-pid PID]   # a running broker
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from common import (
    BrokerProcess,
    create_topic,
    log,
    machine_busy_seconds,
    machine_info,
    make_broker,
    percentiles,
    proc_cpu_seconds,
)

BATCH_BYTES = 1_000_000
LINGER_MS = 5
LATENCY_SAMPLE_EVERY = 16
"""In the throughput runs every 16th message carries a delivery callback (its latency is recorded);
the others have none, so the client's Python thread is not the bottleneck of small messages.
Every message is still checked: ``flush()`` must leave none unsent, and the consume phase reads
all of them back."""
# consume() returns when it has CONSUME_BATCH messages or after CONSUME_WAIT_S: small values keep
# the client from sitting on messages that have already arrived.
CONSUME_BATCH = 1000
CONSUME_WAIT_S = 0.02


@dataclass
class Target:
    """Where the workload goes: a bootstrap address and, when known, the broker's pid for CPU figures."""

    bootstrap: str
    pid: int | None = None

    def cpu(self) -> float:
        return proc_cpu_seconds(self.pid) if self.pid else float("nan")

    @classmethod
    def of(cls, broker: BrokerProcess) -> Target:
        return cls(broker.bootstrap_servers, broker.pid)


@dataclass
class Settings:
    messages: int = 200_000
    sizes: tuple[int, ...] = (100, 1024)
    acks: tuple[str, ...] = ("1", "all")
    partitions: int = 4
    rate: int = 10_000
    rate_seconds: float = 10.0
    rate_size: int = 1024
    timeout_s: float = 300.0
    max_partition_fetch_bytes: int = 1_048_576
    producers: int = 1


class _Deliveries:
    """Delivery-report sink: latencies of acknowledged messages and the first error seen."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: str | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)
            return
        latency = msg.latency()
        if latency is not None:
            self.latencies.append(latency)


class _RequestRtt:
    """librdkafka statistics sink: round trip of requests to the broker (Produce or Fetch here).

    librdkafka reports, per statistics interval, the count, mean and p99 of request round trips
    per broker connection (``brokers[].rtt``, microseconds); the bootstrap connection is left out.
    """

    INTERVAL_MS = 200

    def __init__(self) -> None:
        self.windows: list[tuple[int, float, float]] = []

    def __call__(self, stats_json: str) -> None:
        for b in json.loads(stats_json).get("brokers", {}).values():
            rtt = b.get("rtt") or {}
            if b.get("nodeid", -1) >= 0 and rtt.get("cnt"):
                self.windows.append((rtt["cnt"], rtt["avg"], rtt["p99"]))

    def clear(self) -> None:
        self.windows.clear()

    def summary(self) -> dict[str, float]:
        """``mean``: over all requests; ``p99_max``: the largest per-interval p99 (ms)."""
        n = sum(c for c, _, _ in self.windows)
        if not n:
            return {}
        return {
            "mean": round(sum(c * a for c, a, _ in self.windows) / n / 1000, 3),
            "p99_max": round(max(p for _, _, p in self.windows) / 1000, 3),
            "requests": n,
        }


def _producer(bootstrap: str, acks: str, sink: _Deliveries | None, rtt: _RequestRtt | None = None) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_BYTES,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            **({"on_delivery": sink} if sink else {}),
            **({"stats_cb": rtt, "statistics.interval.ms": _RequestRtt.INTERVAL_MS} if rtt else {}),
        }
    )


def _latency_ms(values: list[float]) -> dict[str, float]:
    stats = {k: round(v * 1000, 3) for k, v in percentiles(values, (50, 90, 99, 99.9)).items()}
    if values:
        stats["max"] = round(max(values) * 1000, 3)
    return stats


def _warm_up(producer: Producer, topic: str, sink: _Deliveries) -> None:
    """One acknowledged message, so connections and metadata are in place before the clock starts."""
    producer.produce(topic, b"warm-up", partition=0, on_delivery=sink)
    if producer.flush(60) != 0 or sink.errors:
        raise RuntimeError(f"warm-up produce to {topic} failed: {sink.first_error or 'not acknowledged in 60 s'}")
    sink.latencies.clear()


def _produce_loop(
    producer: Producer, topic: str, payload: bytes, indexes: range, partitions: int, sink: _Deliveries
) -> None:
    """``produce()`` one message per index (partition ``i % partitions``), every 16th with a callback."""
    for i in indexes:
        while True:
            try:
                if i % LATENCY_SAMPLE_EVERY:
                    producer.produce(topic, payload, partition=i % partitions)
                else:
                    producer.produce(topic, payload, partition=i % partitions, on_delivery=sink)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.005)
        if i & 1023 == 0:
            producer.poll(0)


def _check_delivered(remaining: int, sink: _Deliveries, size: int, acks: str, timeout_s: float) -> None:
    if remaining or sink.errors:
        raise RuntimeError(
            f"produce {size} B acks={acks}: {remaining} messages unacknowledged after {timeout_s} s, "
            f"{sink.errors} failed (first error: {sink.first_error})"
        )


def produce(
    target: Target, topic: str, n: int, size: int, acks: str, partitions: int, timeout_s: float, producers: int = 1
) -> dict:
    """Produce ``n`` messages of ``size`` bytes as fast as possible; see the module docstring.

    ``producers`` > 1 splits them over that many client processes (:func:`_produce_in_processes`).
    """
    if producers > 1:
        return _produce_in_processes(target, topic, n, size, acks, partitions, timeout_s, producers)
    sink = _Deliveries()
    rtt = _RequestRtt()
    producer = _producer(target.bootstrap, acks, None, rtt)
    _warm_up(producer, topic, sink)
    rtt.clear()
    payload = os.urandom(size)
    cpu0 = target.cpu()
    thread0 = time.thread_time()
    t0 = time.perf_counter()
    _produce_loop(producer, topic, payload, range(n), partitions, sink)
    remaining = producer.flush(timeout_s)
    elapsed = time.perf_counter() - t0
    cpu = target.cpu() - cpu0
    busy = time.thread_time() - thread0
    _check_delivered(remaining, sink, size, acks, timeout_s)
    return {
        "messages": n,
        "msgs_per_s": round(n / elapsed),
        "mb_per_s": round(n * size / elapsed / 1e6, 2),
        "seconds": round(elapsed, 3),
        "latency_ms": _latency_ms(sink.latencies),
        "produce_rtt_ms": rtt.summary(),
        "broker_cpu_s": round(cpu, 2),
        "broker_cpu_us_per_msg": round(cpu / n * 1e6, 2),
        "client_thread_busy": round(busy / elapsed, 3),
    }


def _producer_process(
    bootstrap: str, topic: str, indexes: range, size: int, acks: str, partitions: int, timeout_s: float, pipe: Any
) -> None:
    """One client process of :func:`_produce_in_processes`: connect, say ready, wait for the go, produce."""
    sink = _Deliveries()
    producer = _producer(bootstrap, acks, None)
    producer.list_topics(topic, timeout=30)  # metadata and the connection, before the clock starts
    payload = os.urandom(size)
    pipe.send("ready")
    pipe.recv()
    thread0 = time.thread_time()
    process0 = time.process_time()
    start = time.perf_counter()
    _produce_loop(producer, topic, payload, indexes, partitions, sink)
    remaining = producer.flush(timeout_s)
    end = time.perf_counter()
    busy = (time.thread_time() - thread0) / (end - start)
    cpu = time.process_time() - process0  # librdkafka's threads included
    pipe.send((end, busy, sink.latencies, remaining, sink.errors, sink.first_error, cpu))


def _produce_in_processes(
    target: Target, topic: str, n: int, size: int, acks: str, partitions: int, timeout_s: float, producers: int
) -> dict:
    """Produce ``n`` messages from ``producers`` client processes (spawned, each with its own
    librdkafka producer and its share of the messages), all released at once; the rate runs from
    the release to the last process's end of ``flush()``. ``client_thread_busy`` is their mean."""
    sink = _Deliveries()
    warm = _producer(target.bootstrap, acks, None)
    _warm_up(warm, topic, sink)
    ctx = multiprocessing.get_context("spawn")
    shares = [range(k, n, producers) for k in range(producers)]
    pipes, procs = [], []
    for share in shares:
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_producer_process, args=(target.bootstrap, topic, share, size, acks, partitions, timeout_s, child)
        )
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    try:
        for pipe in pipes:
            if not pipe.poll(60) or pipe.recv() != "ready":
                raise RuntimeError(f"produce {size} B acks={acks}: a client process did not start")
        cpu0 = target.cpu()
        machine0 = machine_busy_seconds()
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.send("go")
        results = []
        for pipe in pipes:
            if not pipe.poll(timeout_s + 60):
                raise RuntimeError(f"produce {size} B acks={acks}: a client process did not finish")
            results.append(pipe.recv())
        cpu = target.cpu() - cpu0
        machine1 = machine_busy_seconds()
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    elapsed = max(r[0] for r in results) - t0
    for _end, _busy, latencies, remaining, errors, first_error, _cpu in results:
        sink.latencies.extend(latencies)
        sink.errors += errors
        sink.first_error = sink.first_error or first_error
        _check_delivered(remaining, sink, size, acks, timeout_s)
    return {
        "messages": n,
        "producers": producers,
        "msgs_per_s": round(n / elapsed),
        "mb_per_s": round(n * size / elapsed / 1e6, 2),
        "seconds": round(elapsed, 3),
        "latency_ms": _latency_ms(sink.latencies),
        "broker_cpu_s": round(cpu, 2),
        "broker_cpu_us_per_msg": round(cpu / n * 1e6, 2),
        "client_thread_busy": round(sum(r[1] for r in results) / len(results), 3),
        "producers_cpu_us_per_msg": round(sum(r[6] for r in results) / n * 1e6, 2),
        "machine_busy_cores": round((machine1 - machine0) / elapsed, 2),
    }


def consume(
    target: Target,
    topic: str,
    n: int,
    size: int,
    partitions: int,
    timeout_s: float,
    max_partition_fetch_bytes: int = 1_048_576,
) -> dict:
    """Read ``n`` messages back from offset 0 of every partition; see the module docstring."""
    rtt = _RequestRtt()
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "max.partition.fetch.bytes": max_partition_fetch_bytes,
            "fetch.wait.max.ms": 100,
            "queued.min.messages": 10_000_000,
            "queued.max.messages.kbytes": 2_097_151,
            "fetch.queue.backoff.ms": 0,
            "stats_cb": rtt,
            "statistics.interval.ms": _RequestRtt.INTERVAL_MS,
        }
    )
    cpu0 = target.cpu()
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    payload_bytes = 0
    first_at = 0.0
    first_count = first_bytes = 0
    errors: list[str] = []
    try:
        while got < n:
            msgs = consumer.consume(CONSUME_BATCH, CONSUME_WAIT_S)
            for m in msgs:
                if m.error():
                    errors.append(str(m.error()))
                else:
                    got += 1
                    payload_bytes += len(m.value() or b"")
            if msgs and not first_at:
                first_at, first_count, first_bytes = time.perf_counter(), got, payload_bytes
            if errors or time.perf_counter() - t0 > timeout_s:
                break
        end = time.perf_counter()
        cpu = target.cpu() - cpu0
    finally:
        consumer.close()
    if got < n:
        raise RuntimeError(
            f"consume {size} B: got {got} of {n} messages in {end - t0:.1f} s (errors: {errors[:3] or 'none'})"
        )
    steady = max(end - first_at, 1e-9)
    return {
        "messages": got,
        "msgs_per_s": round((got - first_count) / steady),
        "mb_per_s": round((payload_bytes - first_bytes) / steady / 1e6, 2),
        "seconds": round(steady, 3),
        "seconds_total": round(end - t0, 3),
        "first_message_s": round(first_at - t0, 3),
        "broker_cpu_s": round(cpu, 2),
        "fetch_rtt_ms": rtt.summary(),
        "broker_cpu_us_per_msg": round(cpu / got * 1e6, 2),
    }


def fixed_rate(target: Target, topic: str, rate: int, seconds: float, size: int, timeout_s: float) -> dict:
    """Produce at ``rate`` msg/s for ``seconds`` with acks=all; the delivery latency distribution."""
    sink = _Deliveries()
    producer = _producer(target.bootstrap, "all", sink)
    _warm_up(producer, topic, sink)
    payload = os.urandom(size)
    total = int(rate * seconds)
    sent = 0
    cpu0 = target.cpu()
    t0 = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            producer.produce(topic, payload, partition=0)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    send_elapsed = time.perf_counter() - t0
    remaining = producer.flush(timeout_s)
    elapsed = time.perf_counter() - t0
    cpu = target.cpu() - cpu0
    if remaining or sink.errors:
        raise RuntimeError(
            f"fixed rate {rate}/s: {remaining} unacknowledged, {sink.errors} failed (first: {sink.first_error})"
        )
    return {
        "messages": total,
        "size_bytes": size,
        "target_msgs_per_s": rate,
        "achieved_msgs_per_s": round(total / send_elapsed),
        "latency_ms": _latency_ms(sink.latencies),
        "broker_cpu_s": round(cpu, 2),
        "broker_cpu_pct": round(cpu / elapsed * 100, 1),
    }


def run_suite(target: Target, s: Settings) -> dict[str, Any]:
    """Every workload once against ``target``: ``{"produce": {cell: ...}, "consume": {...}, "fixed_rate": ...}``.

    Cells are named ``"<size>B acks=<acks>"``. Each cell writes a fresh topic, then reads it back.
    """
    result: dict[str, Any] = {"produce": {}, "consume": {}}
    run = uuid.uuid4().hex[:6]
    for size in s.sizes:
        for acks in s.acks:
            cell = f"{size}B acks={acks}"
            topic = f"bench-{run}-{size}-{acks}"
            create_topic(target.bootstrap, topic, s.partitions)
            log(f"  produce {cell}: {s.messages} messages")
            result["produce"][cell] = produce(
                target, topic, s.messages, size, acks, s.partitions, s.timeout_s, s.producers
            )
            log(f"  consume {cell}")
            # the warm-up message is in the topic too
            result["consume"][cell] = consume(
                target, topic, s.messages + 1, size, s.partitions, s.timeout_s, s.max_partition_fetch_bytes
            )
    if s.rate > 0 and s.rate_seconds > 0:
        topic = f"bench-{run}-rate"
        create_topic(target.bootstrap, topic, 1)
        log(f"  fixed rate {s.rate} msg/s x {s.rate_seconds} s, {s.rate_size} B, acks=all")
        result["fixed_rate"] = fixed_rate(target, topic, s.rate, s.rate_seconds, s.rate_size, s.timeout_s)
    return result


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(
        messages=args.messages,
        sizes=tuple(int(x) for x in args.sizes.split(",") if x),
        acks=tuple(x for x in args.acks.split(",") if x),
        partitions=args.partitions,
        rate=args.rate,
        rate_seconds=args.rate_seconds,
        rate_size=args.rate_size,
        max_partition_fetch_bytes=args.max_partition_fetch_bytes,
        producers=args.producers,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=200_000, help="messages per produce cell")
    parser.add_argument("--sizes", default="100,1024", help="message sizes in bytes, comma separated")
    parser.add_argument("--acks", default="1,all", help="acks settings, comma separated")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each throughput topic")
    parser.add_argument("--rate", type=int, default=10_000, help="fixed-rate run: msg/s (0 to skip)")
    parser.add_argument("--rate-seconds", type=float, default=10.0, help="fixed-rate run: duration")
    parser.add_argument("--rate-size", type=int, default=1024, help="fixed-rate run: message size")
    parser.add_argument(
        "--producers", type=int, default=1, help="client processes sharing each produce cell (default 1: this one)"
    )
    parser.add_argument(
        "--max-partition-fetch-bytes",
        type=int,
        default=1_048_576,
        help="consumer's max.partition.fetch.bytes (librdkafka's default: 1 MiB)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="odradek", help="broker to start: odradek or tansu")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--broker-pid", type=int, help="pid of the running broker (for CPU figures)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    settings = settings_from_args(args)
    out: dict[str, Any] = {"machine": machine_info(), "settings": settings.__dict__}
    try:
        if args.bootstrap:
            out["broker"] = args.bootstrap
            out["results"] = run_suite(Target(args.bootstrap, args.broker_pid), settings)
        else:
            with make_broker(args.broker) as broker:
                log(f"{args.broker} ready in {broker.ready_s:.3f} s on {broker.bootstrap_servers}")
                out["broker"] = args.broker
                out["results"] = run_suite(Target.of(broker), settings)
                out["broker_peak_rss_mb"] = round(broker.peak_rss_bytes() / 1e6, 1)
    except (RuntimeError, KafkaException) as exc:
        out["error"] = str(exc)
        print(json.dumps(out, indent=2))
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
