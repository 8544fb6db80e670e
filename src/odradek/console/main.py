"""``odradek ui``: serve the web console.

::

    odradek ui --bootstrap-server H:P [--zookeeper Z] [--listen 127.0.0.1:8080]
               [--metrics-url URL ...] [--command-config FILE] [--read-only]
               [--sign-in {auto,scram,none}] [--auth-proxy-header HEADER [--super-users U;U]
               [--allow-everyone-if-no-acl-found]] [--schema-registry-url URL]

Binds 127.0.0.1:8080 by default (a non-loopback ``--listen`` is allowed but warned about: put a
TLS-terminating proxy in front). ``--sign-in auto`` (the default) requires signing in when the
``--command-config`` file makes the console connect with SASL SCRAM; see :mod:`odradek.console.auth`.
With ``--auth-proxy-header`` the user is the one an authenticating proxy names in that header, and the
console evaluates the cluster's ACLs for them (:mod:`odradek.console.guard`).
Exits 2 on usage errors, 1 when the config cannot be read; otherwise serves until interrupted.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence

from odradek.cli.common import ArgumentParser, add_command_config, client_security, parse_args
from odradek.console.app import ConsoleConfig
from odradek.errors import InvalidConfigError

__all__ = ["build_parser", "config_from_args", "main", "parse_listen"]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek ui", description="Serve the web console.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker(s) to connect to")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="ZooKeeper of the cluster (optional)")
    parser.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="where to serve")
    parser.add_argument(
        "--metrics-url", action="append", default=[], metavar="URL", help="a broker's metrics listener (repeatable)"
    )
    parser.add_argument("--read-only", action="store_true", help="refuse every change")
    parser.add_argument(
        "--sign-in",
        choices=("auto", "scram", "none"),
        default="auto",
        help="require users to sign in with their SCRAM credentials (auto: when --command-config uses SCRAM)",
    )
    parser.add_argument(
        "--auth-proxy-header",
        metavar="HEADER",
        help="the request header in which an authenticating proxy names the user (e.g. X-Forwarded-User); "
        "the console then evaluates the cluster's ACLs for User:<name>",
    )
    parser.add_argument(
        "--super-users", default="", metavar="User:a;User:b", help="the brokers' super.users (with --auth-proxy-header)"
    )
    parser.add_argument(
        "--allow-everyone-if-no-acl-found",
        action="store_true",
        help="the brokers' allow.everyone.if.no.acl.found=true (with --auth-proxy-header)",
    )
    parser.add_argument("--schema-registry-url", metavar="URL", help="the schema registry (Confluent's REST API)")
    add_command_config(parser)
    return parser


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6) -> (host, port); ValueError if malformed."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"invalid --listen {text!r}: expected host:port")
    return host, int(port)


def config_from_args(args: argparse.Namespace) -> ConsoleConfig:
    security = client_security(args)
    scram = security.uses_sasl and security.sasl_mechanism.startswith("SCRAM-")
    if args.sign_in == "scram" and not scram:
        raise InvalidConfigError("--sign-in scram needs a --command-config with a SASL protocol and a SCRAM mechanism")
    if args.auth_proxy_header is not None and args.sign_in == "scram":
        raise InvalidConfigError("--auth-proxy-header and --sign-in scram exclude each other")
    proxy = args.auth_proxy_header
    return ConsoleConfig(
        bootstrap_servers=args.bootstrap_server,
        security=security,
        zookeeper=args.zookeeper,
        metrics_urls=list(args.metrics_url),
        read_only=args.read_only,
        sign_in=proxy is None and (args.sign_in == "scram" or (args.sign_in == "auto" and scram)),
        auth_proxy_header=proxy,
        super_users=args.super_users,
        allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
        schema_registry_url=args.schema_registry_url,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        host, port = parse_listen(args.listen)
        config = config_from_args(args)
    except (ValueError, InvalidConfigError) as exc:
        print(f"odradek ui: error: {exc}", file=sys.stderr)
        return 1
    try:
        if not ipaddress.ip_address(host).is_loopback:
            print(f"odradek ui: warning: serving on {host}, not only this machine", file=sys.stderr)
    except ValueError:
        print(f"odradek ui: warning: serving on {host}", file=sys.stderr)
    import uvicorn

    from odradek.console.app import create_app

    try:
        uvicorn.run(create_app(config), host=host, port=port, log_level="warning", access_log=False)
    finally:
        config.security.close()
    return 0
