"""The broker's SASL/OAUTHBEARER keys (Kafka 3.9's ``SaslConfigs`` / ``BrokerSecurityConfigs``).

Each may be given plainly, per listener (``listener.name.<l>.<key>``) or per listener and mechanism
(``listener.name.<l>.oauthbearer.<key>``, which wins). Keys of the client-side login (token
endpoint, login callback handler, login refresh) are accepted so a Kafka ``server.properties``
loads; the broker does not log in with OAUTHBEARER itself (an OAUTHBEARER inter-broker listener is
refused). :func:`oauthbearer_validator` builds the listener's token validator; it reads the
JWKS file, or fetches the JWKS from its https URL (blocking, at start, as Kafka).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.configdef import ConfigDef, at_least
from odradek.errors import InvalidConfigError
from odradek.security.sasl.jaas import parse_single_login_module
from odradek.security.sasl.oauthbearer import (
    OAUTHBEARER_LOGIN_MODULE,
    SECURED_VALIDATOR_CLASS,
    SECURED_VALIDATOR_CLASS_SECURED_PACKAGE,
    UNSECURED_VALIDATOR_CLASS,
    JwksEndpoint,
    JwksFile,
    JwtValidator,
    TokenValidator,
    UnsecuredValidator,
    allowed_urls,
    check_url_allowed,
)
from odradek.security.tls import create_ssl_context

_ACCEPTED = "Accepted for compatibility (a client-side login setting; the broker does not log in with OAUTHBEARER)."

OAUTHBEARER_CONFIGS = (
    ConfigDef()
    .define(
        "sasl.server.callback.handler.class",
        "string",
        None,
        "The OAUTHBEARER token validator (per listener and mechanism: "
        "`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`): unset or Kafka's "
        "`...oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler` validates unsecured "
        "JWTs (`alg: none`, JAAS options `unsecuredValidator*`); "
        "`org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler` verifies signed JWTs "
        "against `sasl.oauthbearer.jwks.endpoint.url`. Other classes are refused; PLAIN and SCRAM take none.",
    )
    .define("sasl.login.callback.handler.class", "string", None, _ACCEPTED)
    .define("sasl.login.class", "string", None, _ACCEPTED)
    .define(
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        "Where the signed-JWT validator reads its verification keys (a JWKS): a `file://` URL (the file is read "
        "again when it changes) or an https URL (fetched at start, then refreshed; TLS from the "
        "OAuthBearerLoginModule JAAS options `ssl.truststore.*`, else the system's CAs). Allowed URLs: "
        "`-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=<url>,...` in `KAFKA_OPTS` (unset: any).",
    )
    .define(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "long",
        3600000,
        "How often a JWKS fetched over https is fetched again (a token naming an unknown `kid` also asks for "
        "a fetch, at most every 10 s); a `file://` JWKS is read again when the file changes.",
        at_least(0),
    )
    .define(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "long",
        100,
        "Wait before fetching a JWKS again after a failed fetch, doubled after each failure.",
        at_least(0),
    )
    .define(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "long",
        10000,
        "The longest wait between failed JWKS fetches.",
        at_least(0),
    )
    .define(
        "sasl.oauthbearer.expected.audience",
        "list",
        None,
        "Audiences a signed JWT's `aud` must name one of; unset: the audience is not checked.",
    )
    .define(
        "sasl.oauthbearer.expected.issuer",
        "string",
        None,
        "The `iss` a signed JWT must carry; unset: the issuer is not checked.",
    )
    .define("sasl.oauthbearer.scope.claim.name", "string", "scope", "The claim of a signed JWT holding its scope.")
    .define(
        "sasl.oauthbearer.sub.claim.name", "string", "sub", "The claim of a signed JWT naming the principal (User:)."
    )
    .define(
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        30,
        "Clock difference allowed with the issuer when checking a signed JWT's `exp`, `nbf` and `iat`.",
        at_least(0),
    )
    .define("sasl.oauthbearer.token.endpoint.url", "string", None, _ACCEPTED)
    .define("sasl.login.refresh.window.factor", "double", 0.8, _ACCEPTED)
    .define("sasl.login.refresh.window.jitter", "double", 0.05, _ACCEPTED)
    .define("sasl.login.refresh.min.period.seconds", "int", 60, _ACCEPTED)
    .define("sasl.login.refresh.buffer.seconds", "int", 300, _ACCEPTED)
    .define("sasl.login.connect.timeout.ms", "int", None, _ACCEPTED)
    .define("sasl.login.read.timeout.ms", "int", None, _ACCEPTED)
    .define("sasl.login.retry.backoff.ms", "long", 100, _ACCEPTED)
    .define("sasl.login.retry.backoff.max.ms", "long", 10000, _ACCEPTED)
)

OAUTHBEARER_MECHANISM_KEYS = tuple(OAUTHBEARER_CONFIGS.keys)
"""Keys that may also be given per listener and mechanism (``listener.name.<l>.oauthbearer.<key>``)."""

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
