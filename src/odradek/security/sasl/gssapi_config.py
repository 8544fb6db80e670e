"""The broker's SASL/GSSAPI keys (Kafka 3.9's ``SaslConfigs`` Kerberos keys) and the listener's acceptor.

Each key may be given plainly or per listener (``listener.name.<l>.<key>``). The JAAS entry is
``listener.name.<l>.gssapi.sasl.jaas.config`` (else ``sasl.jaas.config``), a
``com.sun.security.auth.module.Krb5LoginModule`` with ``useKeyTab=true keyTab="..."
principal="kafka/host@REALM"``: the keytab's key for that principal accepts the clients' tickets,
and the same keytab logs the broker in to the others when ``sasl.mechanism.inter.broker.protocol``
is GSSAPI (:mod:`odradek.client.security`). Keys of Kafka's JVM login thread (kinit command, renew
window, jitter, relogin time) are accepted: MIT krb5 renews tickets from the keytab by itself.

:func:`gssapi_acceptor` reads the keytab once (at start-up or when a listener's keys change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gssapi

from odradek.configdef import ConfigDef, at_least
from odradek.errors import InvalidConfigError
from odradek.security.kerberos import RULES_KEY, KerberosName, KerberosShortNamer, default_realm
from odradek.security.sasl.gssapi import KRB5_LOGIN_MODULE, GssapiSaslServer, KeytabLogin
from odradek.security.sasl.jaas import parse_single_login_module

__all__ = ["GSSAPI_CONFIGS", "GssapiAcceptor", "gssapi_acceptor"]

_ACCEPTED = "Accepted for compatibility (Kafka's JVM login thread); MIT krb5 renews tickets from the keytab."

GSSAPI_CONFIGS = (
    ConfigDef()
    .define(
        "sasl.kerberos.service.name",
        "string",
        None,
        "The Kerberos service name brokers run as (the first component of their principal, e.g. `kafka` for "
        "`kafka/host@REALM`): the broker's own GSSAPI connections ask for a ticket to `<name>/<broker host>`. "
        "Required when `sasl.mechanism.inter.broker.protocol` is GSSAPI, unless the JAAS entry sets `serviceName`.",
    )
    .define(
        RULES_KEY,
        "list",
        ["DEFAULT"],
        "Rules mapping a Kerberos name to the short name of its `User:` principal, tried in order: `DEFAULT` "
        "(the first component when the realm is the default realm) or `RULE:[n:format](regexp)s/pattern/repl/g/L` "
        "(Kafka's syntax; /L lower-cases, /U upper-cases). A name no rule maps is refused.",
    )
    .define("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", _ACCEPTED)
    .define("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, _ACCEPTED)
    .define("sasl.kerberos.ticket.renew.jitter", "double", 0.05, _ACCEPTED)
    .define("sasl.kerberos.min.time.before.relogin", "long", 60000, _ACCEPTED, at_least(0))
)


@dataclass(frozen=True)
class GssapiAcceptor:
    """A listener's GSSAPI acceptor: credentials from its keytab and the principal mapping."""

    principal: str
    credentials: gssapi.Credentials
    short_namer: KerberosShortNamer

    def sasl_server(self) -> GssapiSaslServer:
        return GssapiSaslServer(self.credentials, self.short_namer)


def gssapi_acceptor(value: Callable[[str], Any], jaas: str | None, *, jaas_key: str) -> GssapiAcceptor:
    """The acceptor of one listener: ``value(key)`` gives a GSSAPI key's value for the listener,
    ``jaas`` its Krb5LoginModule entry (named ``jaas_key`` in errors). InvalidConfigError naming
    the key: no JAAS entry, another login module, no principal, a keytab without the principal,
    a malformed rule."""
    if not jaas:
        raise InvalidConfigError(
            f"No JAAS configuration for SASL/GSSAPI: set {jaas_key} ({KRB5_LOGIN_MODULE} required useKeyTab=true "
            'storeKey=true keyTab="/path/kafka.keytab" principal="kafka/host@REALM";)'
        )
    login = KeytabLogin.from_jaas(parse_single_login_module(jaas, key=jaas_key), key=jaas_key)
    if not login.principal:
        raise InvalidConfigError(f'Invalid value for configuration {jaas_key}: GSSAPI needs principal="..."')
    realm = default_realm()
    if not realm and login.principal != "*":
        realm = KerberosName.parse(login.principal).realm or ""
    rules = value(RULES_KEY)
    namer = KerberosShortNamer.from_config([str(r) for r in rules or []], realm)
    return GssapiAcceptor(login.principal, login.acceptor_credentials(key=jaas_key), namer)
