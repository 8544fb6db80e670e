"""``odradek broker [--config server.properties] [--override k=v ...]``: run one broker.

Kafka's ``kafka-server-start.sh server.properties --override k=v``. The broker runs until
SIGINT/SIGTERM, then shuts down cleanly (clean-shutdown markers written, so the next start skips
recovery). A bad config file, key or value exits with status 1 and one line naming the problem;
an unreachable ZooKeeper likewise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from odradek.cli import lean_kio  # noqa: F401  (first: loads kio without hypothesis)
from odradek.errors import InvalidConfigError
from odradek.server.config import KafkaConfig, parse_properties


def load_config(config_file: str | None, overrides: list[str]) -> KafkaConfig:
    props: dict[str, str] = {}
    if config_file:
        try:
            with open(config_file, encoding="utf-8") as f:
                props.update(parse_properties(f.read()))
        except OSError as exc:
            raise InvalidConfigError(f"cannot read config file {config_file}: {exc.strerror}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigError(f"invalid --override {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return KafkaConfig(props)


async def _serve(config: KafkaConfig) -> None:
    from odradek.server.broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await broker.startup()
        print(f"odradek broker {config.broker_id} listening on {broker.bootstrap_servers}", flush=True)
        await stop.wait()
    finally:
        await broker.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek broker", description="Run an odradek broker.")
    parser.add_argument("config", nargs="?", help="server.properties file (Kafka's format)")
    parser.add_argument("--config", dest="config_opt", help="server.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--logger",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="one logger's level, e.g. kafka.request.logger=DEBUG (repeatable; log4j's log4j.logger.NAME)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    for item in args.logger:
        name, sep, level = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError(f"expected NAME=LEVEL, not {item!r}")
            logging.getLogger(name.strip()).setLevel(level.strip().upper())
        except ValueError as exc:
            print(f"odradek broker: --logger: {exc}", file=sys.stderr)
            return 2
    try:
        config = load_config(args.config_opt or args.config, args.override)
    except InvalidConfigError as exc:
        print(f"odradek broker: {exc}", file=sys.stderr)
        return 1
    from odradek.server.malloc_tuning import tune_malloc

    tune_malloc()
    try:
        asyncio.run(_serve(config))
    except InvalidConfigError as exc:
        print(f"odradek broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odradek broker: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. the metadata store is unreachable
        name = type(exc).__name__
        if name in ("StoreUnavailableError",):
            print(f"odradek broker: {exc}", file=sys.stderr)
            return 1
        raise
    return 0
