"""Delegation token requests from a client (Kafka's ``Admin.createDelegationToken``,
``renewDelegationToken``, ``expireDelegationToken``, ``describeDelegationToken``).

Each function sends one request on a connection (at the highest version both sides speak: v3 for
Create and Describe, v2 for Renew and Expire) and returns the answer, or raises the error code as
an exception of :mod:`odradek.client.errors` with Kafka's message for it (``DELEGATION_TOKEN_NOT_FOUND:
Delegation Token is not found on server.``). An owner other than the requester needs v3 (KIP-373).

Timestamps are epoch milliseconds; HMACs are the raw 64 bytes (``base64`` of them is the token's
password). Runs on the caller's event loop.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from odradek.client.connection import KafkaConnection
from odradek.client.errors import raise_for
from odradek.errors import ErrorCode, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.security.delegation_token import TokenInformation
from odradek.security.principal import KafkaPrincipal

__all__ = ["KAFKA_MESSAGES", "DelegationToken", "create_token", "describe_tokens", "expire_token", "renew_token"]

KAFKA_MESSAGES = {
    ErrorCode.delegation_token_auth_disabled: "Delegation Token feature is not enabled.",
    ErrorCode.delegation_token_not_found: "Delegation Token is not found on server.",
    ErrorCode.delegation_token_owner_mismatch: "Specified Principal is not valid Owner/Renewer.",
    ErrorCode.delegation_token_request_not_allowed: (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "
        "authenticated channels."
    ),
    ErrorCode.delegation_token_authorization_failed: "Delegation Token authorization failed.",
    ErrorCode.delegation_token_expired: "Delegation Token is expired.",
    ErrorCode.invalid_principal_type: "Request principal type is not supported.",
}
"""Kafka's default message of each error these APIs answer (``Errors``)."""


@dataclass(frozen=True)
class DelegationToken:
    info: TokenInformation
    hmac: bytes


def _check(code: int) -> None:
    if code:
        try:
            message = KAFKA_MESSAGES.get(ErrorCode(code))
        except ValueError:
            message = None
        raise_for(code, message)


async def create_token(
    conn: KafkaConnection,
    *,
    renewers: list[KafkaPrincipal] | None = None,
    max_lifetime_ms: int = -1,
    owner: KafkaPrincipal | None = None,
) -> DelegationToken:
    version = conn.version_for(ApiKey.CREATE_DELEGATION_TOKEN, 1, 3)
    if owner is not None and version < 3:
        raise UnsupportedVersionError("creating a token for another owner needs CreateDelegationToken v3")
    rb = conn.builder(ApiKey.CREATE_DELEGATION_TOKEN, version, version)
    fields: dict[str, Any] = {
        "renewers": tuple(
            rb.make("CreatableRenewers", principal_type=r.principal_type, principal_name=r.name) for r in renewers or ()
        ),
        "max_lifetime": datetime.timedelta(milliseconds=max_lifetime_ms),
    }
    if version >= 3:
        fields["owner_principal_type"] = owner.principal_type if owner else None
        fields["owner_principal_name"] = owner.name if owner else None
    response: Any = await conn.send(rb(**fields))
    _check(response.error_code)
    info = _token_information(response, version, tuple(renewers or ()))
    return DelegationToken(info, bytes(response.hmac))


async def renew_token(conn: KafkaConnection, token_hmac: bytes, renew_period_ms: int = -1) -> int:
    """The token's new expiry timestamp."""
    return await _change_expiry(
        conn,
        ApiKey.RENEW_DELEGATION_TOKEN,
        hmac=token_hmac,
        renew_period=datetime.timedelta(milliseconds=renew_period_ms),
    )


async def expire_token(conn: KafkaConnection, token_hmac: bytes, expiry_period_ms: int = -1) -> int:
    """The token's new expiry timestamp (now, for a negative period: the token is gone)."""
    return await _change_expiry(
        conn,
        ApiKey.EXPIRE_DELEGATION_TOKEN,
        hmac=token_hmac,
        expiry_time_period=datetime.timedelta(milliseconds=expiry_period_ms),
    )


async def _change_expiry(conn: KafkaConnection, api_key: ApiKey, **fields: Any) -> int:
    """Send Renew or Expire (v1-v2, whichever is highest on both sides) with ``fields``; the new
    expiry timestamp, or the error code raised."""
    version = conn.version_for(api_key, 1, 2)
    rb = conn.builder(api_key, version, version)
    response: Any = await conn.send(rb(**fields))
    _check(response.error_code)
    return int(response.expiry_timestamp)


async def describe_tokens(conn: KafkaConnection, owners: list[KafkaPrincipal] | None = None) -> list[DelegationToken]:
    """The tokens the broker shows this principal; ``owners`` None: every token it may see."""
    version = conn.version_for(ApiKey.DESCRIBE_DELEGATION_TOKEN, 1, 3)
    rb = conn.builder(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, version)
    asked = (
        None
        if owners is None
        else tuple(
            rb.make("DescribeDelegationTokenOwner", principal_type=o.principal_type, principal_name=o.name)
            for o in owners
        )
    )
    response: Any = await conn.send(rb(owners=asked))
    _check(response.error_code)
    tokens = []
    for t in response.tokens:
        renewers = tuple(KafkaPrincipal(r.principal_type, r.principal_name) for r in t.renewers)
        info = _token_information(t, version, renewers)
        tokens.append(DelegationToken(info, bytes(t.hmac)))
    return tokens


def _token_information(answer: Any, version: int, renewers: tuple[KafkaPrincipal, ...]) -> TokenInformation:
    """A token's information from a CreateDelegationToken response or a DescribeDelegationToken
    entry (both name the same fields); below v3 there is no requester field: the owner is it."""
    owner = KafkaPrincipal(answer.principal_type, answer.principal_name)
    requester = (
        KafkaPrincipal(answer.token_requester_principal_type, answer.token_requester_principal_name)
        if version >= 3
        else owner
    )
    return TokenInformation(
        answer.token_id,
        owner,
        requester,
        renewers,
        int(answer.issue_timestamp),
        int(answer.max_timestamp),
        int(answer.expiry_timestamp),
    )
