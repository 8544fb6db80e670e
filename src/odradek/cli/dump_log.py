"""``odradek dump-log``: print the content of segment files (Kafka's ``kafka-dump-log.sh``).

Usage::

    odradek dump-log --files 00000000000000000000.log,00000000000000000000.index
                     [--print-data-log] [--deep-iteration] [--verify-index-only] [--index-sanity-check]

``.log`` files print one line per batch (``--deep-iteration`` adds one per record,
``--print-data-log`` also keys and values); ``.index``/``.timeindex`` files print their entries and
check each against the log (``--verify-index-only`` checks without printing entries). Problems
go to stderr. Exit status: 0, 1 when an index or a log is wrong, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys

from odradek.storage.dump import dump_files

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek dump-log",
        description="Parse segment files (.log, .index, .timeindex) and dump their contents.",
    )
    parser.add_argument("--files", required=True, help="Comma-separated list of files to dump.")
    parser.add_argument(
        "--print-data-log", action="store_true", help="Print record keys and values (implies --deep-iteration)."
    )
    parser.add_argument("--deep-iteration", action="store_true", help="Print every record, not just batches.")
    parser.add_argument(
        "--verify-index-only", action="store_true", help="Verify index files against the log without printing them."
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="Only run the start-up sanity check of index files (the one that decides a rebuild).",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    files = [f for f in (part.strip() for part in args.files.split(",")) if f]
    if not files:
        print("--files needs at least one file", file=sys.stderr)
        return 2
    result = dump_files(
        files,
        print_data_log=args.print_data_log,
        deep_iteration=args.deep_iteration,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
    )
    for line in result.lines:
        print(line)
    for line in result.errors:
        print(line, file=sys.stderr)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
