"""Client quotas: does a producer quota hold, and what does the bookkeeping cost? Prints JSON.

1. ``hold``: one broker (embedded metadata store, Kafka's default quota windows: 11 of 1 s), a
   ``producer_byte_rate`` of ``--quota`` bytes/s (1 MB/s) on the client id ``quota-bench`` set with
   ``odradek configs`` (AlterClientQuotas). A confluent-kafka producer with that client id and a
   small local queue (``queue.buffering.max.kbytes`` 256, so what is queued is soon sent) produces
   ``--record-size`` records until ``--periods`` x ``--seconds`` (3 x 30 s) after the first
   throttle time it is told. Figures: payload bytes acknowledged per second over the first
   consecutive ``--seconds`` periods from the start and from the first throttle (after the initial
   burst), over all periods from the first throttle, each with ``deviation_pct`` from the quota
   (target: within 10 %), the throttle times the client reported (KIP-219), per-5-s rates, and the
   load average before and after. The broker throttles ``producer_byte_rate`` on a token bucket
   (a burst of quota x 10 windows, then each request waits until the bucket is back at zero), so
   after the first throttle the rate holds at the quota; the first period from the start holds
   the burst on top.
2. ``model``: the broker's algorithms alone in simulated time (its ``ClientQuotaManager``, a
   greedy client sending 64 KiB requests at 20 MB/s, each after the previous one's throttle), with
   the same figures, for Kafka's ``Rate`` (what Kafka enforces byte rates with), the broker's
   token bucket, and a bucket with KIP-599's burst (quota x 11 windows):
   what each gives a client that always has data, without a broker, a client library or a shared
   machine in the way. Kafka's ``Rate`` lets quota x 10 through at the start (the rate is taken
   over at least 10 windows) and again whenever the samples of a burst expire (11 s after its last
   event); between bursts the throttles add up to a whole window per request (the window taken
   drops from up to 11 s to 10 s when a sample completes), so the rate alternates between bursts
   and near silence, and which bursts fall in a period decides its figure (see
   docs/performance.md "Client quotas"). Runs in a second.
3. ``overhead``: two brokers at once, one without quotas (nothing recorded), one where the
   producer's client id has a quota far above what it sends (every Produce request is recorded
   and measured, never throttled). Bursts of ``--messages`` records alternate between them for
   ``--rounds`` pairs (the order flips each round), in two shapes as ``metrics_overhead.py``
   (``batched``, ``small_requests``). ``throughput_overhead_pct`` is the median of the pairs'
   throughput ratios (positive = slower with the quota), which cancels most of a shared machine's
   drift; target <= 2 %. On a machine shared with other work the pairs still scatter widely, so
   ``bookkeeping`` also times the per-request quota path itself in this process (µs per call) and
   relates it to the broker CPU per small Produce request measured without quotas.

    PYTHONPATH=src python bench/quotas.py [--seconds 30] [--quota 1000000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from typing import Any

from confluent_kafka import Producer

from common import OdradekBroker, create_topic, log, machine_info, median
from metrics_overhead import Load
from odradek.cli import configs
from odradek.server.client_quotas import PRODUCER_BYTE_RATE, ClientQuotaManager

CLIENT_ID = "quota-bench"


def set_quota(broker: OdradekBroker, rate: int) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = configs.main(
            [
                "--bootstrap-server",
                broker.bootstrap_servers,
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                CLIENT_ID,
                "--add-config",
                f"producer_byte_rate={rate}",
            ]
        )
    if status != 0:
        raise RuntimeError(f"odradek configs failed: {out.getvalue()}")


def hold(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    with OdradekBroker() as broker:
        create_topic(broker.bootstrap_servers, "quota", 1)
        set_quota(broker, args.quota)
        acked: list[tuple[float, int]] = []
        throttles: list[float] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked.append((time.perf_counter(), len(msg.value())))

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "client.id": CLIENT_ID,
                "acks": 1,
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 256,
                "throttle_cb": lambda e: throttles.append(e.throttle_time),
            }
        )
        payload = os.urandom(args.record_size)
        t0 = time.perf_counter()
        first_throttle: float | None = None
        while first_throttle is None or time.perf_counter() - first_throttle < args.seconds * args.periods:
            try:
                producer.produce("quota", payload, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.005)
            producer.poll(0)
            if first_throttle is None and throttles:
                first_throttle = time.perf_counter()
            if first_throttle is None and time.perf_counter() - t0 > args.seconds:
                raise RuntimeError("the producer was never throttled")
        t1 = time.perf_counter()
        producer.flush(120)
    assert first_throttle is not None

    return {
        "quota_bytes_per_s": args.quota,
        "first_throttle_after_s": round(first_throttle - t0, 2),
        **periods_report(acked, t0, first_throttle, t1, args),
        "throttle_reports": len(throttles),
        "throttle_ms_median": round(median(throttles) * 1000),
        "load_average_1_5_15_min": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
    }


def periods_report(
    acked: list[tuple[float, int]], t0: float, first_throttle: float, t1: float, args: argparse.Namespace
) -> dict[str, Any]:
    """Bytes per second of ``acked`` ((time s, bytes), time ordered) over consecutive
    ``--seconds`` periods from the start and from the first throttle, and by 5 s slices."""

    def rate(start: float, end: float) -> float:
        return sum(size for at, size in acked if start <= at < end) / (end - start)

    def period(start: float, end: float) -> dict[str, Any]:
        r = rate(start, end)
        dev = (r / args.quota - 1) * 100
        return {"bytes_per_s": round(r), "deviation_pct": round(dev, 2), "within_10_pct": abs(dev) <= 10}

    def consecutive(start: float) -> list[dict[str, Any]]:
        n = int((t1 - start) // args.seconds)
        return [period(start + i * args.seconds, start + (i + 1) * args.seconds) for i in range(n)]

    return {
        "periods_from_start": consecutive(t0),
        "periods_from_first_throttle": consecutive(first_throttle),
        "whole_run_from_first_throttle": {"seconds": round(t1 - first_throttle, 1), **period(first_throttle, t1)},
        "bytes_per_s_by_5s_from_start": [round(rate(t0 + i, t0 + i + 5)) for i in range(0, int(t1 - t0) - 4, 5)],
    }


def model(args: argparse.Namespace) -> dict[str, Any]:
    """The broker's algorithms alone, in simulated time (no broker, no client library): a
    ``ClientQuotaManager`` (11 windows of 1 s) throttling on Kafka's ``Rate`` (``kafka_rate``), on
    the token bucket the broker uses (``token_bucket``: burst quota x 10 windows) and on one with
    KIP-599's burst (``token_bucket_kip599_burst``: quota x 11 windows, for comparison), each
    against a greedy client that sends a request of ``--model-request-bytes`` as soon as the link
    (``--model-link-bytes-per-s``) and the channel's throttle allow (the channel is muted for the
    throttle time from the answer on, KIP-219)."""
    out: dict[str, Any] = {
        "request_bytes": args.model_request_bytes,
        "link_bytes_per_s": args.model_link_bytes_per_s,
    }
    for name, bucket, burst_windows in (
        ("kafka_rate", False, None),
        ("token_bucket", True, None),
        ("token_bucket_kip599_burst", True, 11),
    ):
        manager = ClientQuotaManager(PRODUCER_BYTE_RATE, token_bucket=bucket)
        if burst_windows is not None:
            manager.burst_windows = burst_windows
        out[name] = greedy_client(manager, args)
    return out


def greedy_client(manager: ClientQuotaManager, args: argparse.Namespace) -> dict[str, Any]:
    """The simulated greedy client of :func:`model` against ``manager``."""
    now_ms = 0.0
    manager.update_quota((None, CLIENT_ID), float(args.quota), now_ms)
    send_ms = args.model_request_bytes / args.model_link_bytes_per_s * 1000
    acked: list[tuple[float, int]] = []
    throttles: list[int] = []
    first_throttle: float | None = None
    while first_throttle is None or now_ms / 1000 - first_throttle < args.seconds * args.periods:
        now_ms += send_ms
        throttle = manager.record("ANONYMOUS", CLIENT_ID, args.model_request_bytes, now_ms)
        acked.append((now_ms / 1000, args.model_request_bytes))
        if throttle:
            throttles.append(throttle)
            if first_throttle is None:
                first_throttle = now_ms / 1000
        now_ms += throttle
    return {
        "burst_bytes": round(manager.burst(float(args.quota))) if manager.token_bucket else None,
        "first_throttle_after_s": round(first_throttle, 2),
        **periods_report(acked, 0.0, first_throttle, now_ms / 1000, args),
        "throttle_ms_median": round(median([float(t) for t in throttles])),
        "throttle_ms_max": max(throttles),
    }


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    plain, quota = OdradekBroker(), OdradekBroker()
    out: dict[str, Any] = {}
    with plain, quota:
        for broker in (plain, quota):
            create_topic(broker.bootstrap_servers, "load", 1)
        set_quota(quota, 10**12)  # recorded on every request, never reached
        extra = {"client.id": CLIENT_ID}
        for shape, linger, batch, messages in (
            ("batched", 5, 0, args.messages * 10),
            ("small_requests", 0, args.small_batch, args.messages),
        ):
            loads = {
                "without_quota": Load(plain, "load", args.overhead_record_size, linger, batch, extra),
                "with_quota": Load(quota, "load", args.overhead_record_size, linger, batch, extra),
            }
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in loads}
            for rnd in range(args.rounds):
                for name in list(loads) if rnd % 2 == 0 else list(reversed(loads)):
                    runs[name].append(loads[name].burst(messages))
            log(f"{shape}: {args.rounds} rounds done")
            ratios = [w[0] / p[0] for w, p in zip(runs["with_quota"], runs["without_quota"], strict=True)]
            out[shape] = {
                "records_per_s": {name: round(median([r[0] for r in rs])) for name, rs in runs.items()},
                "broker_cpu_us_per_record": {name: round(median([r[1] for r in rs]), 2) for name, rs in runs.items()},
                "throughput_overhead_pct": round((1 - median(ratios)) * 100, 2),
                "pair_ratios_throughput": [round(r, 3) for r in ratios],
            }
    # the bookkeeping itself, timed in this process: what every Produce request adds on the broker
    cost = bookkeeping_us()
    per_request = out["small_requests"]["broker_cpu_us_per_record"]["without_quota"] * args.small_batch
    out["bookkeeping"] = {
        "us_per_request": round(cost, 2),
        "broker_cpu_us_per_small_request": round(per_request, 1),
        "pct_of_small_request_cpu": round(cost / per_request * 100, 2) if per_request else None,
    }
    return out


def bookkeeping_us(calls: int = 200_000) -> float:
    """Microseconds per call of the per-request quota path (identity, record, rate, throttle check)."""
    from odradek.server.client_quotas import ClientQuotas, quota_identity

    quotas = ClientQuotas()
    quotas.client_config_changed(CLIENT_ID, {"producer_byte_rate": str(10**12)})
    t0 = time.perf_counter()
    for _ in range(calls):
        user, client = quota_identity("ANONYMOUS", CLIENT_ID)
        quotas.produce.record(user, client, 1100.0)
    return (time.perf_counter() - t0) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of one measured period")
    parser.add_argument("--periods", type=int, default=3, help="consecutive periods after the first throttle")
    parser.add_argument("--quota", type=int, default=1_000_000, help="producer_byte_rate, bytes/s")
    parser.add_argument("--record-size", type=int, default=1000, help="bytes per record (hold)")
    parser.add_argument("--overhead-record-size", type=int, default=100, help="bytes per record (overhead)")
    parser.add_argument("--messages", type=int, default=20000, help="records per burst (x10 when batched)")
    parser.add_argument("--small-batch", type=int, default=10, help="records per request in small_requests")
    parser.add_argument("--rounds", type=int, default=9, help="pairs of bursts per shape")
    parser.add_argument("--model-request-bytes", type=int, default=65536, help="request size (model)")
    parser.add_argument("--model-link-bytes-per-s", type=float, default=20e6, help="unthrottled speed (model)")
    parser.add_argument("--skip", choices=("model", "hold", "overhead"), action="append", default=[])
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine_info()}
    if "model" not in args.skip:
        result["model"] = model(args)
    if "hold" not in args.skip:
        result["hold"] = hold(args)
    if "overhead" not in args.skip:
        result["overhead"] = overhead(args)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
