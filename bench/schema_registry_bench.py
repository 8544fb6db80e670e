"""The schema registry's figures: schema lookups by id served from memory, and registration latency.

One in-process broker (``BrokerRunner``, its own thread) serves the registry on
``schema.registry.listener``. ``--schemas`` Avro record schemas are registered one at a time under
distinct subjects through the REST API (each answered only once read back from ``_schemas``): their
round trips give ``register_p50_ms`` / ``register_p99_ms``. Then ``--clients`` threads, each with a
keep-alive HTTP connection, read ``GET /schemas/ids/{id}`` for random ids for ``--seconds``:
``lookups_per_s`` (HTTP, the registry's own thread and loop) and ``lookup_p50_us`` / ``lookup_p99_us``.
``state_lookups_per_s`` is the in-memory map alone, without HTTP. One JSON document to stdout.

    python bench/schema_registry_bench.py [--schemas 200] [--clients 4] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import threading
import time

import httpx

from odradek.server.runner import BrokerRunner

V1 = "application/vnd.schemaregistry.v1+json"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schemas", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runner = BrokerRunner(tmp, {"schema.registry.listener": "http://127.0.0.1:0"}).start()
        try:
            assert runner.broker is not None and runner.broker.schema_registry is not None
            server = runner.broker.schema_registry
            url = server.url
            latencies_ms: list[float] = []
            ids: list[int] = []
            with httpx.Client(base_url=url, headers={"Content-Type": V1}) as client:
                for i in range(args.schemas):
                    fields = [{"name": f"f{j}", "type": "long"} for j in range(i % 20 + 1)]
                    body = {"schema": json.dumps({"type": "record", "name": f"Bench{i}", "fields": fields})}
                    t0 = time.perf_counter()
                    answer = client.post(f"/subjects/bench-{i}/versions", json=body)
                    latencies_ms.append((time.perf_counter() - t0) * 1000)
                    answer.raise_for_status()
                    ids.append(answer.json()["id"])
            counts = [0] * args.clients
            samples: list[list[float]] = [[] for _ in range(args.clients)]
            stop = time.perf_counter() + args.seconds

            def reader(n: int) -> None:
                rng = random.Random(n)
                with httpx.Client(base_url=url) as client:
                    while time.perf_counter() < stop:
                        t0 = time.perf_counter()
                        client.get(f"/schemas/ids/{rng.choice(ids)}").raise_for_status()
                        samples[n].append((time.perf_counter() - t0) * 1e6)
                        counts[n] += 1

            threads = [threading.Thread(target=reader, args=(n,)) for n in range(args.clients)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - t0
            all_samples = [s for per in samples for s in per]
            assert server.registry is not None
            state = server.registry.state
            n, t1 = 0, time.perf_counter()
            while time.perf_counter() - t1 < 1.0:
                for schema_id in ids:
                    state.by_id.get(schema_id)
                n += len(ids)
            state_rate = n / (time.perf_counter() - t1)
        finally:
            runner.stop()
    print(
        json.dumps(
            {
                "benchmark": "schema_registry",
                "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
                "schemas": args.schemas,
                "register_p50_ms": round(statistics.median(latencies_ms), 2),
                "register_p99_ms": round(_pct(latencies_ms, 0.99), 2),
                "clients": args.clients,
                "lookups_per_s": round(sum(counts) / elapsed),
                "lookup_p50_us": round(_pct(all_samples, 0.5)),
                "lookup_p99_us": round(_pct(all_samples, 0.99)),
                "state_lookups_per_s": round(state_rate),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
