"""SASL/OAUTHBEARER from the broker's keys (defined in :mod:`odradek.security.sasl.mechanism_keys`,
Kafka 3.9's ``SaslConfigs`` / ``BrokerSecurityConfigs``).

Each key may be given plainly, per listener (``listener.name.<l>.<key>``) or per listener and mechanism
(``listener.name.<l>.oauthbearer.<key>``, which wins). Keys of the client-side login (token
endpoint, login callback handler, login refresh) configure the broker's own OAUTHBEARER login when
``sasl.mechanism.inter.broker.protocol=OAUTHBEARER`` (and odradek's clients'): :func:`client_login`
builds it. :func:`oauthbearer_validator` builds the listener's token validator; it reads the
JWKS file, or fetches the JWKS from its https URL (blocking, at start, as Kafka).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from odradek.errors import InvalidConfigError
from odradek.security.sasl import OAUTHBEARER_LOGIN_MODULE
from odradek.security.sasl.jaas import parse_single_login_module
from odradek.security.sasl.oauthbearer import (
    SECURED_VALIDATOR_CLASS,
    SECURED_VALIDATOR_CLASS_SECURED_PACKAGE,
    UNSECURED_VALIDATOR_CLASS,
    JwtValidator,
    TokenValidator,
    UnsecuredValidator,
    allowed_urls,
    check_url_allowed,
)
from odradek.security.sasl.oauthbearer_jwks import JwksEndpoint, JwksFile
from odradek.security.sasl.oauthbearer_login import (
    LOGIN_CALLBACK_HANDLER_CLASS,
    LOGIN_CALLBACK_HANDLER_CLASS_SECURED_PACKAGE,
    ClientCredentialsLogin,
    LoginLease,
    LoginRefreshConfig,
    OAuthBearerLogin,
    UnsecuredLogin,
)
from odradek.security.tls import create_ssl_context

SECURED_CLASSES = (SECURED_VALIDATOR_CLASS, SECURED_VALIDATOR_CLASS_SECURED_PACKAGE)


def oauthbearer_validator(value: Callable[[str], Any], jaas_text: str | None, prefix: str) -> TokenValidator:
    """The validator a listener's keys ask for; ``value(key)`` is the key's typed value for the
    listener's OAUTHBEARER mechanism, ``prefix`` names the listener in errors."""
    handler = value("sasl.server.callback.handler.class")
    options: dict[str, str] = {}
    if jaas_text:
        entry = parse_single_login_module(
            jaas_text, key=f"{prefix}oauthbearer.sasl.jaas.config", expected_module=OAUTHBEARER_LOGIN_MODULE
        )
        options = entry.options
    if not handler or handler == UNSECURED_VALIDATOR_CLASS:
        return UnsecuredValidator.from_jaas_options(options)
    if handler not in SECURED_CLASSES:
        raise InvalidConfigError(
            f"Invalid value {handler} for configuration {prefix}oauthbearer.sasl.server.callback.handler.class: "
            f"served: {SECURED_VALIDATOR_CLASS}, {UNSECURED_VALIDATOR_CLASS}"
        )
    url = value("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise InvalidConfigError(
            f"{prefix}oauthbearer.sasl.oauthbearer.jwks.endpoint.url (or sasl.oauthbearer.jwks.endpoint.url) "
            f"must be set with {handler}"
        )
    check_url_allowed(str(url), allowed_urls(), "sasl.oauthbearer.jwks.endpoint.url")
    keys: JwksFile | JwksEndpoint
    if str(url).startswith("file:"):
        keys = JwksFile(str(url))
    else:
        # TLS to the JWKS endpoint from the JAAS options' ssl.* keys, as Kafka's JaasOptionsUtils
        tls = {k: v for k, v in options.items() if k.startswith("ssl.")}
        keys = JwksEndpoint(
            str(url),
            refresh_ms=int(value("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
            backoff_ms=int(value("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")),
            backoff_max_ms=int(value("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")),
            ssl_context=create_ssl_context(tls, server_side=False) if str(url).startswith("https:") else None,
        )
    return JwtValidator(
        keys,
        audience=[str(a) for a in value("sasl.oauthbearer.expected.audience") or []],
        issuer=value("sasl.oauthbearer.expected.issuer") or None,
        scope_claim=str(value("sasl.oauthbearer.scope.claim.name")),
        sub_claim=str(value("sasl.oauthbearer.sub.claim.name")),
        clock_skew_s=int(value("sasl.oauthbearer.clock.skew.seconds")),
    )


_LOGINS: weakref.WeakValueDictionary[tuple[Any, ...], OAuthBearerLogin] = weakref.WeakValueDictionary()
"""The open logins by configuration; a login leaves when nobody holds it any more."""
_LOGINS_LOCK = threading.Lock()


def client_login(value: Callable[[str], Any], jaas_text: str, jaas_key: str) -> LoginLease:
    """A hold on the OAUTHBEARER login a client (or the broker's inter-broker connections) uses,
    started: ``value(key)`` is the raw value of a key for that client (None when unset),
    ``jaas_text`` its OAuthBearerLoginModule entry (named ``jaas_key`` in errors).

    One login is shared per distinct configuration while somebody holds it (Kafka's
    ``LoginManager``), so a broker's many connections hold one token; each call is one more
    holder, and the login (its refresh thread) ends when the last :meth:`LoginLease.release` is
    called. A closed login is never handed out: the next call logs in anew. Blocking (the first
    token is obtained here); InvalidConfigError naming the key when misconfigured."""
    entry = parse_single_login_module(jaas_text, key=jaas_key, expected_module=OAUTHBEARER_LOGIN_MODULE)
    handler = value("sasl.login.callback.handler.class")
    refresh = LoginRefreshConfig.from_properties(value)
    url = value("sasl.oauthbearer.token.endpoint.url")
    ident = (jaas_text, handler, refresh, url, value("sasl.oauthbearer.sub.claim.name"))
    with _LOGINS_LOCK:
        shared = _LOGINS.get(ident)
        if shared is not None and shared.acquire():
            return LoginLease(shared)
    login: OAuthBearerLogin
    if not handler:
        login = UnsecuredLogin(entry.options, refresh)
    elif handler in (LOGIN_CALLBACK_HANDLER_CLASS, LOGIN_CALLBACK_HANDLER_CLASS_SECURED_PACKAGE):
        if not url:
            raise InvalidConfigError(
                f"Missing configuration sasl.oauthbearer.token.endpoint.url: {handler} needs the token endpoint"
            )
        check_url_allowed(str(url), allowed_urls(), "sasl.oauthbearer.token.endpoint.url")
        tls = {k: v for k, v in entry.options.items() if k.startswith("ssl.")}
        timeout_ms = value("sasl.login.read.timeout.ms") or value("sasl.login.connect.timeout.ms") or 10000
        login = ClientCredentialsLogin(
            str(url),
            entry.options,
            refresh=refresh,
            sub_claim=str(value("sasl.oauthbearer.sub.claim.name") or "sub"),
            ssl_context=create_ssl_context(tls, server_side=False) if str(url).startswith("https:") else None,
            timeout_s=int(timeout_ms) / 1000,
        )
    else:
        raise InvalidConfigError(
            f"Invalid value {handler} for configuration sasl.login.callback.handler.class: served: "
            f"{LOGIN_CALLBACK_HANDLER_CLASS} (or unset for unsecured tokens)"
        )
    login.start()
    with _LOGINS_LOCK:
        shared = _LOGINS.get(ident)
        if shared is None or not shared.acquire():
            _LOGINS[ident] = login
            return LoginLease(login)
    login.close()  # another caller logged in meanwhile: its login is shared
    return LoginLease(shared)
