"""Memory per connection of one broker process: idle connections, and stalled large-frame connections.

Steps, on an odradek broker in its own process (``bench/common.py``), RSS read from
``/proc/<pid>/status`` (``VmRSS``) after the broker has settled:

1. ``baseline_rss_mb``: after one ApiVersions round trip.
2. ``--stalled`` connections (default 100) each send a 4-byte size prefix declaring
   ``--declared-mb`` (default 100 MB) and ``--sent-kb`` (default 64 KiB) of body, then stall:
   ``stalled_rss_mb`` and ``stalled_delta_mb`` (target < 50), ``new_client_during_stall_ms``.
   They close: ``after_stalled_close_rss_mb`` and ``after_close_delta_mb`` (target < 20).
3. ``--idle`` connections (default 10,000) opened and left silent: ``idle_rss_mb``, the cost
   ``idle_kb_per_connection`` ((idle - RSS before them) / n, KB = 1000 bytes; target <= 20), and
   ``new_client_ms``: an ApiVersions round trip on a fresh connection while they are all open.
   Then they close: ``after_idle_close_rss_mb``.

MB = 10^6 bytes. One JSON document to stdout. The process needs a file-descriptor limit above
``--idle`` (``ulimit -n``).

    python bench/connections_bench.py [--idle 10000] [--stalled 100] [--declared-mb 100] [--sent-kb 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import struct
import time

from common import OdradekBroker, log, machine_info

API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, key, version, correlation, client_id=null


def settle_rss(broker: OdradekBroker, seconds: float = 1.5) -> int:
    time.sleep(seconds)
    return broker.rss_bytes()


def round_trip_ms(port: int) -> float | None:
    """Milliseconds for an ApiVersions round trip on a new connection; None if not served within 10 s."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(API_VERSIONS_V0)
            head = s.recv(8)
    except OSError:
        return None
    if len(head) < 8 or struct.unpack(">ii", head[:8])[1] != 1:
        return None
    return round((time.perf_counter() - t0) * 1000, 2)


def open_idle(port: int, count: int) -> list[socket.socket]:
    conns = []
    for _ in range(count):
        conns.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    return conns


def open_stalled(port: int, count: int, declared: int, sent: int) -> list[socket.socket]:
    conns = []
    body = b"\x00" * sent
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(struct.pack(">i", declared) + body)
        conns.append(s)
    return conns


def close_all(conns: list[socket.socket]) -> None:
    for s in conns:
        s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=10000)
    parser.add_argument("--stalled", type=int, default=100)
    parser.add_argument("--declared-mb", type=int, default=100)
    parser.add_argument("--sent-kb", type=int, default=64)
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mb = 1e6
    out: dict[str, object] = {"bench": "connections", "machine": machine_info(), "args": vars(args)}
    declared = min(args.declared_mb * 1_000_000, 104857600)
    with OdradekBroker() as broker:
        round_trip_ms(broker.port)
        base = settle_rss(broker)
        out["baseline_rss_mb"] = round(base / mb, 1)

        log(f"opening {args.stalled} connections declaring {declared} bytes, sending {args.sent_kb} KiB")
        stalled = open_stalled(broker.port, args.stalled, declared, args.sent_kb * 1024)
        rss = settle_rss(broker)
        out["stalled_rss_mb"] = round(rss / mb, 1)
        out["stalled_delta_mb"] = round((rss - base) / mb, 1)
        out["new_client_during_stall_ms"] = round_trip_ms(broker.port)
        close_all(stalled)
        after = settle_rss(broker, 2.5)
        out["after_stalled_close_rss_mb"] = round(after / mb, 1)
        out["after_close_delta_mb"] = round((after - base) / mb, 1)

        log(f"opening {args.idle} idle connections")
        base2 = broker.rss_bytes()
        idle = open_idle(broker.port, args.idle)
        time.sleep(1.0)
        out["new_client_ms"] = round_trip_ms(broker.port)
        rss = settle_rss(broker)
        out["idle_rss_mb"] = round(rss / mb, 1)
        out["idle_kb_per_connection"] = round((rss - base2) / max(1, args.idle) / 1000, 2)
        close_all(idle)
        out["after_idle_close_rss_mb"] = round(settle_rss(broker, 2.5) / mb, 1)
        out["peak_rss_mb"] = round(broker.peak_rss_bytes() / mb, 1)
        out["alive"] = broker.alive()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
