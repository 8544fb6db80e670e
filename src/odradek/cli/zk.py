"""``odradek zk``: browse the znode tree (a small ``zkCli``).

::

    odradek zk --zookeeper HOST:PORT[,HOST:PORT...][/chroot] ls /brokers/ids
    odradek zk --data-dir /var/lib/odradek get -s /brokers/topics/orders
    odradek zk --data-dir /var/lib/odradek tree /brokers

``--zookeeper`` connects to a ZooKeeper ensemble (Kafka's ``zookeeper.connect`` format) and shows
everything, ephemeral nodes included; ``--zk-tls-config-file FILE`` (Kafka's option: a properties
file of ``zookeeper.ssl.*`` keys) connects with TLS. ``--data-dir`` reads the embedded store's snapshot
``<dir>/metadata/znodes.json`` of a broker's data dir (its first ``log.dirs`` entry; the metadata
dir itself is accepted too), read-only and without locking, so it works whether the broker runs or
not; it shows the persistent znodes as of the broker's last metadata change. Ephemeral znodes
(``/brokers/ids/<id>``, ``/controller``) live only in the running broker's memory and never appear.

Output: ``ls`` prints one child name per line (sorted); ``get`` prints the data as UTF-8 text
(undecodable bytes backslash-escaped) and, with ``-s``, zkCli's stat lines; ``tree`` prints one node
per line, indented two spaces per level, as ``name = data`` (``name`` alone for empty data).
A missing path exits with status 1 and the single line ``No node exists at /x``; an unreachable
ZooKeeper or an unreadable snapshot also exits 1 with one line saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import sys
from typing import TextIO

from odradek.cli.common import CommandError, add_zk_tls_config, zk_tls_context
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.errors import CoordinationError, NoNodeError
from odradek.metadata.snapshot import METADATA_DIR_NAME, SNAPSHOT_FILE, find_snapshot
from odradek.metadata.store import CoordinationStore, ZnodeStat, join_path, validate_path

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek zk", description="Browse the znode tree.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--zookeeper", metavar="CONNECT", help="ZooKeeper connect string host:port[,...][/chroot]")
    source.add_argument("--data-dir", metavar="DIR", help="a broker's data dir (first log.dirs entry)")
    parser.add_argument("--timeout-ms", type=int, default=6000, help="ZooKeeper connection timeout (default 6000)")
    add_zk_tls_config(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    ls = commands.add_parser("ls", help="list the children of PATH")
    ls.add_argument("path")
    get = commands.add_parser("get", help="print the data of PATH")
    get.add_argument("-s", "--stat", action="store_true", help="also print the znode's stat")
    get.add_argument("path")
    tree = commands.add_parser("tree", help="print the subtree at PATH (default /) with data")
    tree.add_argument("path", nargs="?", default="/")
    return parser


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def _print_stat(stat: ZnodeStat, out: TextIO) -> None:
    print(f"ctime = {_time(stat.ctime)}", file=out)
    print(f"mtime = {_time(stat.mtime)}", file=out)
    print(f"dataVersion = {stat.version}", file=out)
    print(f"cversion = {stat.cversion}", file=out)
    print(f"ephemeralOwner = 0x{stat.ephemeral_owner:x}", file=out)
    print(f"dataLength = {stat.data_length}", file=out)
    print(f"numChildren = {stat.num_children}", file=out)


async def _tree(store: CoordinationStore, path: str, depth: int, out: TextIO) -> None:
    try:
        data, _ = await store.get(path)
        children = await store.get_children(path)
    except NoNodeError:
        if depth == 0:
            raise
        return  # deleted while walking
    name = path if depth == 0 else path.rsplit("/", 1)[1]
    line = "  " * depth + name
    print(f"{line} = {_text(data)}" if data else line, file=out)
    for child in children:
        await _tree(store, join_path(path, child), depth + 1, out)


async def _run(store: CoordinationStore, args: argparse.Namespace, out: TextIO) -> None:
    if args.command == "ls":
        for child in await store.get_children(args.path):
            print(child, file=out)
    elif args.command == "get":
        data, stat = await store.get(args.path)
        print(_text(data), file=out)
        if args.stat:
            _print_stat(stat, out)
    else:
        await _tree(store, args.path, 0, out)


async def _with_zookeeper(args: argparse.Namespace, out: TextIO) -> None:
    from odradek.metadata.zookeeper import ZooKeeperStore

    store = ZooKeeperStore(
        args.zookeeper, connection_timeout_ms=args.timeout_ms, tls=zk_tls_context(args.zk_tls_config_file)
    )
    await store.start()
    try:
        await _run(store, args, out)
    finally:
        await store.close()


async def _with_data_dir(args: argparse.Namespace, out: TextIO) -> None:
    snapshot = find_snapshot(args.data_dir)
    if snapshot is None:
        raise CoordinationError(
            f"No embedded metadata store in {args.data_dir} "
            f"(expected {args.data_dir}/{METADATA_DIR_NAME}/{SNAPSHOT_FILE})"
        )
    store = EmbeddedStore(snapshot.parent, read_only=True)
    session = store.session()
    try:
        await _run(session, args, out)
    finally:
        await session.close()


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retries would flood stderr; we report once
    try:
        validate_path(args.path)
    except ValueError as e:
        print(f"odradek zk: {e}", file=sys.stderr)
        return 2
    try:
        if args.zookeeper:
            asyncio.run(_with_zookeeper(args, sys.stdout))
        else:
            asyncio.run(_with_data_dir(args, sys.stdout))
    except NoNodeError as e:
        print(f"No node exists at {e.path}", file=sys.stderr)
        return 1
    except (CoordinationError, CommandError, ValueError) as e:
        print(f"odradek zk: {e}", file=sys.stderr)
        return 1
    return 0
