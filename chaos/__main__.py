"""``python -m chaos [--minutes M] [--seed S] [--brokers N] [--schedule KIND|mixed] [--unclean]
[--max-in-flight N] [--no-consumer-protocol] [--no-share-group] [--report-dir D]``: run a fault campaign against a
local odradek cluster and write its report.

Run from the repository root (``PYTHONPATH=src`` or an installed odradek). Prints the text
report; exit status 0 when the checker found no anomaly, 1 when it found any, 2 on bad arguments.
``--unclean`` runs the fixed unclean-election schedule instead (3 brokers), which must find lost
writes: its exit status is 0 when it does. ``--override KEY=VALUE`` sets a broker config. The mixed
schedule includes ``clock-skew`` when libfaketime is installed (``--no-clock`` leaves it out).
``--no-consumer-protocol`` and ``--no-share-group`` leave out the KIP-848 consumer group and the
KIP-932 share group (both run by default).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from chaos.campaign import CampaignConfig, run_campaign, unclean_election
from chaos.cluster import faketime_available
from chaos.nemesis import CLOCK_KINDS, KINDS, SCHEDULES
from chaos.report import text_report, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of faults (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="repeats a schedule (default: the time)")
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--schedule", choices=SCHEDULES, default="mixed")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s of each producer")
    parser.add_argument("--hold", type=float, default=8.0, help="seconds a fault stays before its heal")
    parser.add_argument("--no-transactions", action="store_true")
    parser.add_argument(
        "--no-consumer-protocol",
        action="store_true",
        help="leave out the KIP-848 consumer group (group.protocol=consumer)",
    )
    parser.add_argument("--no-share-group", action="store_true", help="leave out the KIP-932 share group and its topic")
    parser.add_argument(
        "--no-clock",
        action="store_true",
        help="leave clock-skew (libfaketime) out of the mixed schedule (it is in when libfaketime is installed)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=1,
        help="max.in.flight.requests.per.connection of the idempotent producers (default 1; librdkafka's "
        "default 5 lets librdkafka duplicate records itself, docs/reliability.md)",
    )
    parser.add_argument("--unclean", action="store_true", help="the fixed unclean-election schedule")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--report-dir", default="chaos-report")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # the campaign's own short ZooKeeper reads
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override {item!r}: expected KEY=VALUE")
        overrides[key] = value
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    directory = Path(args.report_dir).resolve()
    config = CampaignConfig(
        minutes=args.minutes,
        seed=seed,
        brokers=args.brokers,
        schedule=args.schedule,
        hold_s=args.hold,
        rate=args.rate,
        transactions=not args.no_transactions,
        consumer_protocol_group=not args.no_consumer_protocol,
        share_group=not args.no_share_group,
        kinds=KINDS + CLOCK_KINDS if faketime_available() and not args.no_clock else KINDS,
        overrides=overrides,
        base_dir=directory,
        max_in_flight=args.max_in_flight,
    )
    result = unclean_election(config) if args.unclean else run_campaign(config)
    paths = write_report(result, directory)
    print(text_report(result))
    print(f"report: {paths['text']} {paths['json']} {paths['timeline']}")
    if args.unclean:
        return 0 if result.check.counts.get("lost-write", 0) else 1
    return 0 if result.valid else 1


if __name__ == "__main__":
    sys.exit(main())
