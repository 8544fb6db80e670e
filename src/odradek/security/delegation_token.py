"""Delegation tokens (KIP-48, KIP-373) as Kafka 3.9's brokers compute them: ids, HMACs, the token
cache with its SCRAM credentials, and the decisions of Create/Renew/Expire/Describe.

A token is :class:`TokenInformation` (id, owner, requester, renewers, issue/max/expiry timestamps in
epoch milliseconds) plus its HMAC, the token's password:

- the **id** is a random UUID's 16 bytes in URL-safe base64 without padding (22 characters, Kafka's
  ``CoreUtils.generateUuidAsBase64``);
- the **HMAC** is HMAC-SHA512 of the id's UTF-8 bytes keyed with ``delegation.token.secret.key``'s
  UTF-8 bytes (64 bytes; Kafka's ``DelegationTokenManager.createHmac``); clients log in with its
  standard base64 (``hmacAsBase64String``) as the SCRAM password and the id as the user name, with
  the SCRAM extension ``tokenauth=true``.

:class:`TokenCache` is Kafka's ``DelegationTokenCache``: token id -> information, base64 HMAC ->
token id, and per SCRAM mechanism a credential derived from the base64 HMAC with the mechanism's
minimum iterations (4096) and a fresh salt (``DelegationTokenManager.prepareScramCredentials``).
The credentials live only in memory: ZooKeeper keeps the token's information, never its HMAC, and
each broker rebuilds the HMAC from the id with the shared secret.

The decisions (:func:`new_token`, :func:`renew`, :func:`expire`, :func:`filter_token`) are
``DelegationTokenManager``'s: a max lifetime <= 0 means the broker's maximum
(``delegation.token.max.lifetime.ms``), a longer one is cut to it; the first expiry is
min(max, issue + ``delegation.token.expiry.time.ms``); renew and expire are allowed to the owner and
the renewers (DELEGATION_TOKEN_OWNER_MISMATCH otherwise), refuse a token past its expiry or max
(DELEGATION_TOKEN_EXPIRED; a negative expiry period removes the token at once, before that check),
a negative renew period means the default expiry time, and a new expiry never passes the max.

Pure functions and a cache mutated by one owner (the broker's event loop); no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from odradek.configdef import ConfigDef, at_least
from odradek.errors import ErrorCode
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl.scram import MECHANISMS, ScramCredential, generate_credential

__all__ = [
    "DELEGATION_TOKEN_CONFIGS",
    "ERROR_TIMESTAMP",
    "TokenCache",
    "TokenInformation",
    "TokenSettings",
    "create_hmac",
    "expire",
    "filter_token",
    "hmac_base64",
    "new_token",
    "new_token_id",
    "renew",
]

ERROR_TIMESTAMP = -1
"""The timestamps of a refused Create/Renew/Expire (Kafka's ``DelegationTokenManager.ErrorTimestamp``)."""

DELEGATION_TOKEN_CONFIGS = (
    ConfigDef()
    .define(
        "delegation.token.secret.key",
        "password",
        None,
        "Secret that signs delegation tokens (KIP-48): HMAC-SHA512 of each token id. The same value on every "
        "broker of the cluster; unset or empty: delegation tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED).",
    )
    .define(
        "delegation.token.master.key",
        "password",
        None,
        "Deprecated alias of `delegation.token.secret.key`, read when that key is unset.",
    )
    .define(
        "delegation.token.max.lifetime.ms",
        "long",
        7 * 24 * 3600 * 1000,
        "The longest a delegation token may live: it cannot be renewed past issue time plus this.",
        at_least(1),
    )
    .define(
        "delegation.token.expiry.time.ms",
        "long",
        24 * 3600 * 1000,
        "A new or renewed delegation token's life when the request names none: it expires after this unless renewed.",
        at_least(1),
    )
    .define(
        "delegation.token.expiry.check.interval.ms",
        "long",
        3600 * 1000,
        "How often each broker removes the tokens past their expiry or max lifetime.",
        at_least(1),
    )
)


@dataclass(frozen=True)
class TokenSettings:
    """The broker's delegation token keys. ``secret_key`` None: tokens disabled."""

    secret_key: str | None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    expiry_check_interval_ms: int = 3600 * 1000

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    @classmethod
    def from_values(cls, get: Callable[[str], object]) -> TokenSettings:
        """From a config lookup (``KafkaConfig.__getitem__``): the secret key, else its alias."""
        secret = get("delegation.token.secret.key") or get("delegation.token.master.key")
        return cls(
            str(secret) if secret else None,
            int(get("delegation.token.max.lifetime.ms")),  # type: ignore[call-overload]
            int(get("delegation.token.expiry.time.ms")),  # type: ignore[call-overload]
            int(get("delegation.token.expiry.check.interval.ms")),  # type: ignore[call-overload]
        )


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's ``TokenInformation.ownerOrRenewer``: the owner, the requester or a renewer."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms


def new_token_id() -> str:
    """A random UUID as 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """HMAC-SHA512 of the id's UTF-8 bytes with the secret key's UTF-8 bytes (64 bytes)."""
    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_base64(token_hmac: bytes) -> str:
    """The token's password as clients use it: standard base64 with padding."""
    return base64.b64encode(token_hmac).decode("ascii")


def new_token(
    settings: TokenSettings,
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    renewers: Sequence[KafkaPrincipal],
    max_lifetime_ms: int,
    now_ms: int,
    token_id: str | None = None,
) -> TokenInformation:
    """A new token's information (``createToken``); ``max_lifetime_ms`` <= 0: the broker's maximum."""
    lifetime = settings.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, settings.max_lifetime_ms)
    max_timestamp = now_ms + lifetime
    return TokenInformation(
        token_id or new_token_id(),
        owner,
        requester,
        tuple(renewers),
        now_ms,
        max_timestamp,
        min(max_timestamp, now_ms + settings.expiry_time_ms),
    )


def _allowed_to_renew(principal: KafkaPrincipal, info: TokenInformation) -> bool:
    return principal == info.owner or principal in info.renewers


def renew(
    settings: TokenSettings, principal: KafkaPrincipal, info: TokenInformation, renew_period_ms: int, now_ms: int
) -> tuple[ErrorCode, TokenInformation | None]:
    """(error, the renewed information or None) for RenewDelegationToken (``renewToken``)."""
    if not _allowed_to_renew(principal, info):
        return ErrorCode.delegation_token_owner_mismatch, None
    if info.expired(now_ms):
        return ErrorCode.delegation_token_expired, None
    period = settings.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
    return ErrorCode.none, replace(info, expiry_timestamp=min(info.max_timestamp, now_ms + period))


def expire(
    principal: KafkaPrincipal, info: TokenInformation, expiry_period_ms: int, now_ms: int
) -> tuple[ErrorCode, TokenInformation | None]:
    """(error, information) for ExpireDelegationToken (``expireToken``): on success the information
    with its new expiry, or, for a negative period, with ``expiry_timestamp = now_ms``: the caller
    removes the token (it is expired at once)."""
    if not _allowed_to_renew(principal, info):
        return ErrorCode.delegation_token_owner_mismatch, None
    if expiry_period_ms < 0:
        return ErrorCode.none, replace(info, expiry_timestamp=now_ms)
    if info.expired(now_ms):
        return ErrorCode.delegation_token_expired, None
    return ErrorCode.none, replace(info, expiry_timestamp=min(info.max_timestamp, now_ms + expiry_period_ms))


def filter_token(
    requester: KafkaPrincipal,
    owners: Sequence[KafkaPrincipal] | None,
    info: TokenInformation,
    authorize_token: Callable[[str], bool],
    authorize_requester: Callable[[KafkaPrincipal], bool],
) -> bool:
    """Whether DescribeDelegationToken shows ``info`` (``DelegationTokenManager.filterToken``): tokens
    of the owners asked (owner, requester or renewer; all when ``owners`` is None); then the
    requester's own tokens, those it may DESCRIBE (``DelegationToken`` resource) and those of owners
    it may DESCRIBE_TOKENS (``User`` resource)."""
    if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
        return False
    if info.owner_or_renewer(requester):
        return True
    return authorize_token(info.token_id) or authorize_requester(info.owner)


@dataclass
class _Entry:
    info: TokenInformation
    hmac_b64: str
    credentials: dict[str, ScramCredential] = field(repr=False)


class TokenCache:
    """Kafka's ``DelegationTokenCache``; see the module docstring. Loop-only."""

    def __init__(self) -> None:
        self._tokens: dict[str, _Entry] = {}
        self._by_hmac: dict[str, str] = {}

    def update(self, info: TokenInformation, token_hmac: bytes) -> None:
        """Add or replace a token; its SCRAM credentials are made again only for a new HMAC."""
        b64 = hmac_base64(token_hmac)
        entry = self._tokens.get(info.token_id)
        if entry is not None and entry.hmac_b64 == b64:
            entry.info = info
            return
        if entry is not None:
            self._by_hmac.pop(entry.hmac_b64, None)
        credentials = {m: generate_credential(m, b64, MECHANISMS[m].min_iterations) for m in MECHANISMS}
        self._tokens[info.token_id] = _Entry(info, b64, credentials)
        self._by_hmac[b64] = info.token_id

    def remove(self, token_id: str) -> None:
        entry = self._tokens.pop(token_id, None)
        if entry is not None:
            self._by_hmac.pop(entry.hmac_b64, None)

    def token(self, token_id: str) -> TokenInformation | None:
        entry = self._tokens.get(token_id)
        return None if entry is None else entry.info

    def token_for_hmac(self, token_hmac: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(hmac_base64(token_hmac))
        return None if token_id is None else self._tokens[token_id].info

    def credential(self, mechanism: str, token_id: str) -> ScramCredential | None:
        entry = self._tokens.get(token_id)
        return None if entry is None else entry.credentials.get(mechanism)

    def owner(self, token_id: str) -> str | None:
        """The owner's name (the SCRAM session's authorization id), None for an unknown token."""
        entry = self._tokens.get(token_id)
        return None if entry is None else entry.info.owner.name

    def tokens(self) -> list[TokenInformation]:
        return [e.info for e in self._tokens.values()]

    def ids(self) -> Iterable[str]:
        return list(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)
