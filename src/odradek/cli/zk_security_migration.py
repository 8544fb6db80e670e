"""``odradek zookeeper-security-migration``: Kafka's ``zookeeper-security-migration.sh``
(``kafka.admin.ZkSecurityMigrator``), setting or removing the ACLs of Kafka's znodes.

::

    odradek zookeeper-security-migration --zookeeper.acl secure|unsecure \\
        [--zookeeper.connect HOST:PORT[,...][/chroot]] [--zk-tls-config-file FILE] [--enable.path.check] \\
        [--zookeeper.session.timeout MS] [--zookeeper.connection.timeout MS]

The session must be authenticated: a JAAS file with a ``Client`` section in ``KAFKA_OPTS``
(``-Djava.security.auth.login.config``, SASL DIGEST-MD5) or a TLS client certificate
(``--zk-tls-config-file`` naming at least ``zookeeper.ssl.client.enable``,
``zookeeper.clientCnxnSocket`` and ``zookeeper.ssl.keystore.location``); otherwise the tool stops
with Kafka's error. With ``secure`` every znode walked gets Kafka's default secure ACLs (CREATOR_ALL,
that is every identity of this session, ``sasl:<user>`` and/or ``x509:<DN>``, plus world READ; the
sensitive paths ``/config/users``, ``/config/brokers``, ``/delegation_token/tokens`` creator only);
with ``unsecure`` they become open to all (``world:anyone`` ALL).

The walk is Kafka's: the root of the chroot alone, then each of Kafka's secure root paths
(:data:`SECURE_ROOT_PATHS`, ``ZkData.SecureRootPaths``) and everything below it, each created
first if missing (``/controller`` is skipped when absent, since only a controller may create it).
``/consumers`` and other paths outside the list are left as they are. Paths missing at start are
listed in a warning on stdout; ``--enable.path.check`` then exits with status 1 before changing
anything. A znode deleted during the walk is skipped with a warning. Progress is logged at INFO
(``Setting ACL for path ...``) and at WARNING on stderr; the default level is WARNING, as Kafka's
tools, and ``-Dlog.level=INFO`` in ``KAFKA_OPTS`` shows every path.

Exit status: 0 done, 1 an error (one line on stderr: no authentication, unreachable ZooKeeper,
no permission to change a znode's ACL: ``ERROR: Not authorized by the ACLs of <path>``), 2 a
usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from odradek.cli.common import ArgumentParser, CommandError, parse_args, zk_tls_context
from odradek.errors import InvalidConfigError
from odradek.metadata.errors import CoordinationError, NodeExistsError, NoNodeError
from odradek.metadata.zookeeper import ZooKeeperStore
from odradek.security.zookeeper_auth import (
    LOGIN_CONFIG_PROPERTY,
    java_system_properties,
    zookeeper_sasl_credentials,
)
from odradek.security.zookeeper_tls import load_zk_tls_config_file, zk_tls_config

__all__ = ["SECURE_ROOT_PATHS", "main", "migrate"]

PROG = "odradek zookeeper-security-migration"
USAGE_MESSAGE = (
    "ZooKeeper Migration Tool Help. This tool updates the ACLs of znodes as part of the process of setting up "
    "ZooKeeper authentication."
)
CONTROLLER_PATH = "/controller"
SECURE_ROOT_PATHS = (
    "/admin",
    "/brokers",
    "/cluster",
    "/config",
    CONTROLLER_PATH,
    "/controller_epoch",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/delegation_token",
    "/kafka-acl-extended",
    "/feature",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended/prefixed",
    "/kafka-acl-extended-changes",
)
"""Kafka 3.9's ``ZkData.SecureRootPaths`` (with ``ZkAclStore.securePaths``)."""

log = logging.getLogger("odradek.zk_security_migration")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=USAGE_MESSAGE)
    parser.add_argument(
        "--zookeeper.acl",
        dest="zookeeper_acl",
        metavar="secure|unsecure",
        help="Indicates whether to make the Kafka znodes in ZooKeeper secure or unsecure. "
        "The options are 'secure' and 'unsecure'",
    )
    parser.add_argument(
        "--zookeeper.connect",
        dest="zookeeper_connect",
        metavar="HOST:PORT[,...][/chroot]",
        default="localhost:2181",
        help="Sets the ZooKeeper connect string (ensemble): a comma-separated list of host:port pairs, "
        "and a chroot (default localhost:2181)",
    )
    parser.add_argument(
        "--zookeeper.session.timeout",
        dest="session_timeout",
        metavar="MS",
        type=int,
        default=30000,
        help="Sets the ZooKeeper session timeout (ms, default 30000)",
    )
    parser.add_argument(
        "--zookeeper.connection.timeout",
        dest="connection_timeout",
        metavar="MS",
        type=int,
        default=30000,
        help="Sets the ZooKeeper connection timeout (ms, default 30000)",
    )
    parser.add_argument(
        "--enable.path.check",
        dest="enable_path_check",
        action="store_true",
        help="Checks if all the root paths exist in ZooKeeper before migration. If not, exit the command.",
    )
    parser.add_argument(
        "--zk-tls-config-file",
        metavar="FILE",
        help="Identifies the file where ZooKeeper client TLS connectivity properties are defined. Any properties "
        "other than zookeeper.ssl.* and zookeeper.clientCnxnSocket are ignored.",
    )
    return parser


class PathCheckFailed(Exception):
    """``--enable.path.check`` found a secure root path missing (already reported on stdout)."""


async def migrate(store: ZooKeeperStore, enable_path_check: bool = False) -> int:
    """Set the store's default ACLs (its ``secure_acls``) on Kafka's znodes; returns how many
    znodes were changed. Raises :class:`PathCheckFailed` (``enable_path_check``),
    CoordinationError (no permission, ZooKeeper gone). Call on the store's event loop."""
    changed = await _set_acl(store, "/")
    missing = [p for p in SECURE_ROOT_PATHS if await store.exists(p) is None]
    if missing:
        print(f"Warning: The following secure root paths do not exist in ZooKeeper: {','.join(missing)}")
        print("That might be due to an incorrect chroot is specified when executing the command.")
        if enable_path_check:
            print("Exit the command.")
            raise PathCheckFailed
    for path in SECURE_ROOT_PATHS:
        log.debug("Going to set ACL for %s", path)
        if path == CONTROLLER_PATH and path in missing:
            log.debug("Ignoring to set ACL for %s, because it doesn't exist", path)
            continue
        try:
            await store.create(path, b"", makepath=True)
        except NodeExistsError:
            pass
        changed += await _set_acls_recursively(store, path)
    return changed


async def _set_acl(store: ZooKeeperStore, path: str) -> int:
    log.info("Setting ACL for path %s", path)
    try:
        await store.set_default_acls(path)
    except NoNodeError:
        log.warning("Znode is gone, it could be have been legitimately deleted: %s", path)
        return 0
    log.info("Successfully set ACLs for %s", path)
    return 1


async def _set_acls_recursively(store: ZooKeeperStore, path: str) -> int:
    """This znode, then its children level by level (each level's requests in flight together)."""
    changed = 0
    level = [path]
    while level:
        results = await asyncio.gather(*(_set_acl(store, p) for p in level))
        changed += sum(results)
        children = await asyncio.gather(*(_children(store, p) for p in level))
        level = [child for group in children for child in group]
    return changed


async def _children(store: ZooKeeperStore, path: str) -> list[str]:
    log.info("Getting children to set ACLs for path %s", path)
    try:
        names = await store.get_children(path)
    except NoNodeError:
        log.warning("Node is gone, it could be have been legitimately deleted: %s", path)
        return []
    return [f"{path.rstrip('/')}/{name}" for name in names]


async def _run(args: argparse.Namespace) -> int:
    kafka_opts = java_system_properties(os.environ.get("KAFKA_OPTS", ""))
    jaas_file = kafka_opts.get(LOGIN_CONFIG_PROPERTY)
    try:
        tls_config = load_zk_tls_config_file(args.zk_tls_config_file) if args.zk_tls_config_file else zk_tls_config({})
        if args.zk_tls_config_file:
            log.info("Found ZooKeeper client configuration properties in file %s", args.zk_tls_config_file)
        tls_auth = tls_config.client_auth_enabled
        if jaas_file is None and not tls_auth:
            raise CommandError(
                "ERROR: No JAAS configuration file has been specified and no TLS client certificate has been "
                f"specified. Please make sure that you set the system property {LOGIN_CONFIG_PROPERTY} or provide a "
                "ZooKeeper client TLS configuration via --zk-tls-config-file <filename> identifying at least "
                "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location"
            )
        sasl = zookeeper_sasl_credentials(None)
        if not tls_auth and sasl is None:
            raise CommandError(f"ERROR: Security isn't enabled, most likely the file isn't set properly: {jaas_file}")
    except InvalidConfigError as e:
        raise CommandError(f"ERROR: {e}") from None
    if args.zookeeper_acl not in ("secure", "unsecure"):
        build_parser().print_usage(sys.stderr)
        print(f"{PROG}: error: --zookeeper.acl must be secure or unsecure", file=sys.stderr)
        return 1
    secure = args.zookeeper_acl == "secure"
    log.info("zookeeper.acl option is %s", args.zookeeper_acl)
    store = ZooKeeperStore(
        args.zookeeper_connect,
        session_timeout_ms=args.session_timeout,
        connection_timeout_ms=args.connection_timeout,
        sasl=sasl,
        secure_acls=secure,
        tls=zk_tls_context(args.zk_tls_config_file),
    )
    await store.start()
    try:
        changed = await migrate(store, args.enable_path_check)
    except PathCheckFailed:
        return 1
    finally:
        await store.close()
    log.info("set the %s ACLs of %d znodes", args.zookeeper_acl, changed)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parsed = parse_args(build_parser(), argv)
    if isinstance(parsed, int):
        return parsed
    level = java_system_properties(os.environ.get("KAFKA_OPTS", "")).get("log.level", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING), format="[%(asctime)s] %(levelname)s %(message)s"
    )
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retries would flood stderr; we report once
    try:
        return asyncio.run(_run(parsed))
    except CommandError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (CoordinationError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
