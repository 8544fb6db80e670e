"""The listener's SASL/GSSAPI acceptor from the broker's Kerberos keys (defined in
:mod:`odradek.security.sasl.mechanism_keys`, Kafka 3.9's ``SaslConfigs`` Kerberos keys).

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

from odradek.errors import InvalidConfigError
from odradek.security.kerberos import RULES_KEY, KerberosName, KerberosShortNamer, default_realm
from odradek.security.sasl import KRB5_LOGIN_MODULE
from odradek.security.sasl.gssapi import GssapiSaslServer, KeytabLogin
from odradek.security.sasl.jaas import parse_single_login_module

__all__ = ["GssapiAcceptor", "gssapi_acceptor"]


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
