"""How a broker authenticates to ZooKeeper and which ACLs its znodes get (Kafka's ``JaasUtils``
``isZkSaslEnabled`` and ``ZkData.defaultAcls``).

**Authentication.** Kafka reads the JVM system properties ``java.security.auth.login.config`` (a
JAAS file), ``zookeeper.sasl.client`` (default ``true``) and ``zookeeper.sasl.clientconfig``
(default ``Client``, the JAAS file's section). odradek reads the same properties from the
``-D<name>=<value>`` options of the ``KAFKA_OPTS`` environment variable (how Kafka's scripts pass
them to the JVM); the broker key ``zookeeper.jaas.config.file`` names the JAAS file too and wins
over ``KAFKA_OPTS``. The section's login module must carry ``username`` and ``password`` (ZooKeeper's
``org.apache.zookeeper.server.auth.DigestLoginModule``): the session authenticates with SASL
DIGEST-MD5 and ZooKeeper knows it as ``sasl:<username>``. Kerberos (``Krb5LoginModule``) is refused.

A JAAS file holds sections ``Name { <entries as in sasl.jaas.config> };``; ``//`` and ``/* */``
comments are allowed between them.

**ACLs** (``zookeeper.set.acl=true``): every znode gets CREATOR_ALL (ZooKeeper's ``auth`` scheme:
every identity of the creating session, here ``sasl:<username>``) plus world READ, except the
sensitive paths (``/config/users``, ``/config/brokers``, ``/delegation_token/tokens`` and what lies
under them: creator ALL only) and ``/consumers`` itself (the old consumers' folder, open to all).
Paths are relative to the chroot. Pure; any thread.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.errors import InvalidConfigError
from odradek.security.sasl.jaas import LoginModuleEntry, _Tokenizer, parse_jaas_config

LOGIN_CONFIG_PROPERTY = "java.security.auth.login.config"
SASL_CLIENT_PROPERTY = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG_PROPERTY = "zookeeper.sasl.clientconfig"
DEFAULT_CLIENT_SECTION = "Client"
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
OPEN_PATHS = ("/consumers",)

# ZooKeeper's permission bits (ZooDefs.Perms)
READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN


@dataclass(frozen=True)
class ZkAcl:
    """One ZooKeeper ACL entry: permission bits and an identity (``scheme``, ``id``)."""

    perms: int
    scheme: str
    id: str


CREATOR_ALL = ZkAcl(ALL, "auth", "")
WORLD_READ = ZkAcl(READ, "world", "anyone")
OPEN = ZkAcl(ALL, "world", "anyone")


@dataclass(frozen=True)
class ZkSaslCredentials:
    """The DIGEST-MD5 login of the broker's ZooKeeper session (from the JAAS ``Client`` section)."""

    username: str
    password: str

    def __repr__(self) -> str:
        return f"ZkSaslCredentials(username={self.username!r})"


def sensitive_path(path: str) -> bool:
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> tuple[ZkAcl, ...]:
    """Kafka's ``ZkData.defaultAcls(isSecure, path)``."""
    if not secure or path in OPEN_PATHS:
        return (OPEN,)
    return (CREATOR_ALL,) if sensitive_path(path) else (CREATOR_ALL, WORLD_READ)


def java_system_properties(kafka_opts: str) -> dict[str, str]:
    """The ``-Dname=value`` options of a JVM command line (``KAFKA_OPTS``); a bare ``-Dname`` is ``""``."""
    try:
        words = shlex.split(kafka_opts)
    except ValueError as e:
        raise InvalidConfigError(f"KAFKA_OPTS cannot be split into options: {e}") from None
    found: dict[str, str] = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            name, _, value = word[2:].partition("=")
            found[name] = value
    return found


def parse_jaas_file(text: str, *, source: str) -> dict[str, list[LoginModuleEntry]]:
    """Every section of a JAAS file by name; :class:`InvalidConfigError` naming ``source``."""
    tokens = _Tokenizer(text)
    sections: dict[str, list[LoginModuleEntry]] = {}
    kind, name = tokens.next()
    while kind != "EOF":
        brace: str | None = "{"
        if name is not None and name.endswith("{") and len(name) > 1:
            name = name[:-1]  # "Client{"
        else:
            brace = tokens.next()[1]
        if kind != "WORD" or not name or brace != "{":
            raise InvalidConfigError(f"{source}: a JAAS section 'Name {{ ... }};' expected")
        start = end = tokens.pos
        while (token := tokens.next()) != ("WORD", "}"):
            if token[0] == "EOF":
                raise InvalidConfigError(f"{source}: section {name} is not closed by '}};'")
            end = tokens.pos
        if tokens.next()[0] != ";":
            raise InvalidConfigError(f"{source}: section {name} is not closed by '}};'")
        sections[name] = parse_jaas_config(text[start:end], key=f"{source} section {name}")
        kind, name = tokens.next()
    return sections


def zookeeper_sasl_credentials(
    jaas_file: str | None, environ: Mapping[str, str] | None = None
) -> ZkSaslCredentials | None:
    """The broker's ZooKeeper login, or None for an unauthenticated session.

    ``jaas_file`` (the ``zookeeper.jaas.config.file`` key) else ``KAFKA_OPTS``'s
    ``-Djava.security.auth.login.config``; none, or ``-Dzookeeper.sasl.client=false``, is None.
    A file without the section is None too, unless ``-Dzookeeper.sasl.clientconfig`` named it
    (an error, as Kafka). Raises :class:`InvalidConfigError` for an unreadable or malformed file,
    or an entry without ``username``/``password``.
    """
    props = java_system_properties((os.environ if environ is None else environ).get("KAFKA_OPTS", ""))
    path = jaas_file or props.get(LOGIN_CONFIG_PROPERTY)
    if not path or props.get(SASL_CLIENT_PROPERTY, "true").strip().lower() == "false":
        return None
    section = props.get(SASL_CLIENT_CONFIG_PROPERTY) or DEFAULT_CLIENT_SECTION
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InvalidConfigError(f"cannot read the JAAS file {path} for ZooKeeper: {e.strerror}") from None
    entries = parse_jaas_file(text, source=path).get(section)
    if entries is None:
        if SASL_CLIENT_CONFIG_PROPERTY in props:
            raise InvalidConfigError(f"JAAS file {path} has no section {section} ({SASL_CLIENT_CONFIG_PROPERTY})")
        return None
    entry = entries[0]
    username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        raise InvalidConfigError(
            f"JAAS file {path} section {section}: {entry.login_module} without username and password; "
            "only SASL DIGEST-MD5 (org.apache.zookeeper.server.auth.DigestLoginModule) is supported"
        )
    return ZkSaslCredentials(username, password)
