"""The SASL mechanisms' broker keys, GSSAPI's and OAUTHBEARER's (Kafka 3.9's ``SaslConfigs``).

Only the key definitions, so the broker's config can name and validate them without loading the
mechanisms themselves (gssapi, PyJWT): :mod:`odradek.security.sasl.gssapi_config` and
:mod:`odradek.security.sasl.oauthbearer_config` build a listener's acceptor, validator and logins
from these keys, and are imported only when a listener or the inter-broker client enables the
mechanism.
"""

from __future__ import annotations

from odradek.configdef import ConfigDef, at_least
from odradek.security.kerberos import RULES_KEY

__all__ = ["GSSAPI_CONFIGS", "OAUTHBEARER_CONFIGS", "OAUTHBEARER_MECHANISM_KEYS"]

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

_LOGIN = "The broker's own OAUTHBEARER login (`sasl.mechanism.inter.broker.protocol=OAUTHBEARER`): "

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
    .define(
        "sasl.login.callback.handler.class",
        "string",
        None,
        _LOGIN + "unset: unsecured tokens from the JAAS options `unsecuredLoginStringClaim_<claim>` etc.; "
        "`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler`: tokens from "
        "`sasl.oauthbearer.token.endpoint.url` (client credentials: JAAS options `clientId`, `clientSecret`, "
        "`scope`).",
    )
    .define("sasl.login.class", "string", None, "Accepted for compatibility (Kafka's login class); ignored.")
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
    .define(
        "sasl.oauthbearer.token.endpoint.url",
        "string",
        None,
        _LOGIN + "the OAuth 2 token endpoint asked for tokens by the client-credentials grant (http or https; "
        "TLS from the JAAS options `ssl.*`); must be allowed by `org.apache.kafka.sasl.oauthbearer.allowed.urls` "
        "when that is set.",
    )
    .define(
        "sasl.login.refresh.window.factor",
        "double",
        0.8,
        _LOGIN + "the token is refreshed once this part of its life has passed.",
    )
    .define(
        "sasl.login.refresh.window.jitter",
        "double",
        0.05,
        _LOGIN + "up to this part of the token's life is added at random to the refresh moment.",
    )
    .define(
        "sasl.login.refresh.min.period.seconds",
        "int",
        60,
        _LOGIN + "the least time between two refreshes.",
        at_least(0),
    )
    .define(
        "sasl.login.refresh.buffer.seconds",
        "int",
        300,
        _LOGIN + "time left before the token expires when it is refreshed at the latest.",
        at_least(0),
    )
    .define("sasl.login.connect.timeout.ms", "int", None, _LOGIN + "timeout of the token endpoint's connection.")
    .define("sasl.login.read.timeout.ms", "int", None, _LOGIN + "timeout of the token endpoint's answer.")
    .define(
        "sasl.login.retry.backoff.ms",
        "long",
        100,
        _LOGIN + "wait before asking the token endpoint again after a failure, doubled after each failure.",
    )
    .define(
        "sasl.login.retry.backoff.max.ms",
        "long",
        10000,
        _LOGIN + "the longest wait between failed token requests.",
    )
)

OAUTHBEARER_MECHANISM_KEYS = tuple(OAUTHBEARER_CONFIGS.keys)
"""Keys that may also be given per listener and mechanism (``listener.name.<l>.oauthbearer.<key>``)."""
