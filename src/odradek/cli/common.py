"""Shared plumbing of the client commands (``odradek topics``, ``console-producer``, ``console-consumer``).

- :class:`ArgumentParser`: argparse that reports a bad flag as ONE line on stderr
  (``odradek topics: error: ...``) and raises :class:`UsageError` instead of exiting, so
  ``main(argv)`` can return the status (2) instead of raising ``SystemExit``;
- :func:`parse_args`: the parsed namespace, or the exit status for ``--help`` (0) and usage errors (2);
- :func:`run`: runs a command's coroutine with ``asyncio.run`` and turns every expected failure
  into one line on stderr and status 1: Kafka errors (unreachable broker, unknown topic, ...),
  :class:`CommandError` (an invalid combination of flags), ``ValueError``; Ctrl-C ends with 130.
  Unexpected exceptions are reported the same way, with their type, never as a traceback;
- :func:`parse_key_values`: ``--property k=v`` / ``--config k=v`` lists to a dict;
- :func:`add_command_config` / :func:`client_properties` / :func:`client_security`: Kafka's
  ``--command-config FILE`` (``--producer.config`` / ``--consumer.config`` for the console tools), a
  properties file of client keys, with ``security.protocol``, ``ssl.*`` and ``sasl.*``
  (:mod:`odradek.client.security`) handed to odradek's client; every security built through
  :func:`client_security` / :func:`command_security` (or handed to :func:`closed_at_exit`) while
  :func:`run` runs a command is closed when the command ends (OAUTHBEARER's login stops refreshing);
- :func:`table`: Kafka's tools' padded columns;
- :func:`coordination_store`: a session with ZooKeeper for the ``--zookeeper`` modes (or the store a
  test injects, left open); :func:`add_zk_tls_config` / :func:`zk_tls_context`: Kafka's
  ``--zk-tls-config-file FILE``, a properties file of ``zookeeper.ssl.*`` keys
  (:mod:`odradek.security.zookeeper_tls`; other keys ignored) making that session TLS.

Call from the main thread, outside any running event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import logging
import ssl
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, NoReturn

from odradek.client.security import ClientSecurity, read_properties_file
from odradek.errors import InvalidConfigError, KafkaError
from odradek.metadata.store import CoordinationStore

__all__ = [
    "MISSING",
    "ArgumentParser",
    "CommandError",
    "UsageError",
    "add_command_config",
    "add_zk_tls_config",
    "client_properties",
    "client_security",
    "closed_at_exit",
    "command_security",
    "coordination_store",
    "parse_args",
    "parse_key_values",
    "run",
    "table",
    "zk_tls_context",
]

MISSING = "-"
"""What a table cell shows for None."""


class UsageError(Exception):
    """A command-line usage problem, already reported on stderr."""


class CommandError(Exception):
    """A failure to report as one line (the message) with exit status 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors and no ``sys.exit``."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise UsageError(message)


def parse_args(parser: ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The namespace, or an exit status: 0 after ``--help``, 2 after a usage error."""
    try:
        return parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError:
        return 2
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else 0


def parse_key_values(items: Sequence[str] | None, flag: str) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; CommandError for an item without ``=``."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"invalid {flag} {item!r}: expected key=value")
        out[key.strip()] = value
    return out


COMMAND_CONFIG_HELP = (
    "a properties file of client keys: security.protocol, ssl.* (truststore, keystore), sasl.mechanism, "
    "sasl.jaas.config"
)


def add_command_config(parser: argparse.ArgumentParser, *flags: str, help: str = COMMAND_CONFIG_HELP) -> None:
    """``--command-config FILE`` (or the tool's own spellings, all stored as ``command_config``)."""
    parser.add_argument(*(flags or ("--command-config",)), dest="command_config", metavar="FILE", help=help)


def client_properties(args: argparse.Namespace, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The keys of ``args.command_config`` (when given), with ``overrides`` (``--producer-property``
    ...) over them. InvalidConfigError when the file cannot be read."""
    path = getattr(args, "command_config", None)
    props = read_properties_file(path) if path else {}
    props.update(overrides or {})
    return props


def client_security(args: argparse.Namespace, overrides: Mapping[str, str] | None = None) -> ClientSecurity:
    """How the tool's client connects: :func:`client_properties` as a ClientSecurity (closed when
    the command :func:`run` runs ends)."""
    return command_security(client_properties(args, overrides))


def command_security(props: Mapping[str, Any]) -> ClientSecurity:
    """``ClientSecurity.from_properties(props)``, closed when the command :func:`run` runs ends."""
    return closed_at_exit(ClientSecurity.from_properties(props))


_OPENED: contextvars.ContextVar[list[ClientSecurity] | None] = contextvars.ContextVar("opened", default=None)
"""The securities the command under :func:`run` built (the list is shared by its tasks and threads,
which copy the context)."""


def closed_at_exit(security: ClientSecurity) -> ClientSecurity:
    """``security``, closed when the command :func:`run` runs ends (outside :func:`run`: left to
    the caller)."""
    opened = _OPENED.get()
    if opened is not None:
        opened.append(security)
    return security


def run(prog: str, main: Callable[[], Coroutine[Any, Any, int]], error_prefix: str | None = None) -> int:
    """``asyncio.run(main())`` with every failure reported as one line on stderr; the client
    securities the command built (:func:`closed_at_exit`) are closed when it ends."""
    opened: list[ClientSecurity] = []
    token = _OPENED.set(opened)
    try:
        return _run(prog, main, error_prefix)
    finally:
        _OPENED.reset(token)
        for security in opened:
            security.close()


def _run(prog: str, main: Callable[[], Coroutine[Any, Any, int]], error_prefix: str | None) -> int:
    prefix = error_prefix if error_prefix is not None else f"{prog}: error: "
    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except (KafkaError, CommandError, ValueError, OSError) as exc:
        print(f"{prefix}{exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # never a traceback on the console
        print(f"{prefix}unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def table(header: Sequence[str], rows: Sequence[Sequence[object]], widths: Sequence[int | None]) -> list[str]:
    """Kafka-style columns, one space apart: each padded to its widest cell and at least its
    ``widths`` minimum; a None minimum leaves that column unpadded (the last one). None cells
    print as :data:`MISSING`."""
    cells = [[str(c) for c in header]] + [[MISSING if c is None else str(c) for c in row] for row in rows]
    sizes = [None if low is None else max([low] + [len(r[i]) for r in cells]) for i, low in enumerate(widths)]
    return [" ".join(c if size is None else c.ljust(size) for c, size in zip(row, sizes)).rstrip() for row in cells]


ZK_TLS_CONFIG_FILE_HELP = (
    "a properties file of ZooKeeper client TLS keys (zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, "
    "zookeeper.ssl.keystore.*, zookeeper.ssl.truststore.*, ...); any other key is ignored"
)


def add_zk_tls_config(parser: argparse.ArgumentParser) -> None:
    """Kafka's ``--zk-tls-config-file`` option (``args.zk_tls_config_file``)."""
    parser.add_argument("--zk-tls-config-file", metavar="FILE", help=ZK_TLS_CONFIG_FILE_HELP)


def zk_tls_context(path: str | None) -> ssl.SSLContext | None:
    """The TLS context of a ``--zk-tls-config-file`` (None without a file, or with TLS not enabled
    there nor in ``KAFKA_OPTS``' ``-Dzookeeper.client.secure``). Raises :class:`CommandError`
    naming the bad key."""
    return _zk_tls(path)[0]


def _zk_tls(path: str | None) -> tuple[ssl.SSLContext | None, bool]:
    """(:func:`zk_tls_context`, whether a client certificate authenticates the session)."""
    from odradek.security.zookeeper_tls import load_zk_tls_config_file, zk_tls_config

    try:
        config = load_zk_tls_config_file(path) if path else zk_tls_config({})
        return config.ssl_context(), config.client_auth_enabled
    except InvalidConfigError as e:
        raise CommandError(str(e)) from None


@contextlib.asynccontextmanager
async def coordination_store(
    connect: str,
    injected: CoordinationStore | None = None,
    *,
    timeout_ms: int = 30000,
    zk_tls_config_file: str | None = None,
) -> AsyncIterator[CoordinationStore]:
    """A ZooKeeper session on ``connect`` (``host:port[,...][/chroot]``), closed on exit; or
    ``injected`` as is (a test's in-memory store, not closed).

    As Kafka's tools: with a JAAS file in ``KAFKA_OPTS`` (``-Djava.security.auth.login.config``)
    whose ``Client`` section logs in, the session authenticates with SASL DIGEST-MD5;
    ``zk_tls_config_file`` (``--zk-tls-config-file``) makes it TLS, authenticated by the client
    certificate when the file names a key store. An authenticated session creates znodes with
    Kafka's secure ACLs."""
    if injected is not None:
        yield injected
        return
    from odradek.metadata.zookeeper import ZooKeeperStore
    from odradek.security.zookeeper_auth import zookeeper_sasl_credentials

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its retries would flood stderr; we report once
    try:
        sasl = zookeeper_sasl_credentials(None)
    except InvalidConfigError as e:
        raise CommandError(str(e)) from None
    tls, tls_auth = _zk_tls(zk_tls_config_file)
    store = ZooKeeperStore(
        connect,
        session_timeout_ms=timeout_ms,
        connection_timeout_ms=timeout_ms,
        sasl=sasl,
        secure_acls=sasl is not None or tls_auth,
        tls=tls,
    )
    await store.start()
    try:
        yield store
    finally:
        await store.close()
