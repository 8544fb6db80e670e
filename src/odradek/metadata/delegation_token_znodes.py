"""Delegation tokens in ZooKeeper, Kafka's layout (``ZkData``'s ``DelegationToken*ZNode``)::

    /delegation_token                                  created by the first broker with a secret key
    /delegation_token/tokens/<tokenId>                 one token's information (JSON below)
    /delegation_token/token_changes/token_change_<10-digit seq>   data: the token id (UTF-8)

A token znode holds ``DelegationTokenManagerZk.toJsonCompatibleMap`` (version 3)::

    {"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":["User%3Abob"],
     "issueTimestamp":1700000000000,"maxTimestamp":1700604800000,"expiryTimestamp":1700086400000,
     "tokenId":"o8f7dS2pQ3uXz2j1cM2a1w"}

Principals are ``<type>:<name>`` sanitized as Kafka's ``Sanitizer`` does (URL-encoded). Versions
1 and 2 have no ``tokenRequester`` (the owner is the requester). The HMAC and the SCRAM
credentials are never stored: each broker derives them from the id and its secret key. The
``/delegation_token/tokens`` subtree is one of Kafka's sensitive paths (creator-only ACLs when
``zookeeper.set.acl`` is on).

Every change to a token (create, renew, expire, removal) writes the token znode (or deletes it)
and then a change notification, which every broker's
:class:`~odradek.metadata.change_notifications.ZkNodeChangeNotificationListener` turns into a
cache update: the token is read again, and a token znode that is gone removes the token.

Loop-only, like the store.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.metadata.config_entities import desanitize, sanitize
from odradek.metadata.errors import NodeExistsError, NoNodeError
from odradek.metadata.store import CoordinationStore
from odradek.security.delegation_token import TokenInformation
from odradek.security.principal import KafkaPrincipal

__all__ = [
    "CURRENT_VERSION",
    "DELEGATION_TOKEN_PATH",
    "TOKENS_PATH",
    "TOKEN_CHANGES_PATH",
    "TOKEN_CHANGE_PREFIX",
    "create_delegation_token_paths",
    "create_token_change_notification",
    "decode_token_info",
    "delete_delegation_token",
    "encode_token_info",
    "get_delegation_token_info",
    "set_or_create_delegation_token",
    "token_ids",
    "token_info_path",
]

DELEGATION_TOKEN_PATH = "/delegation_token"
TOKENS_PATH = f"{DELEGATION_TOKEN_PATH}/tokens"
TOKEN_CHANGES_PATH = f"{DELEGATION_TOKEN_PATH}/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"
CURRENT_VERSION = 3


def token_info_path(token_id: str) -> str:
    return f"{TOKENS_PATH}/{token_id}"


def encode_token_info(info: TokenInformation) -> bytes:
    """The token znode's JSON (version 3), compact as Kafka's ``Json.encodeAsBytes``."""
    body = {
        "version": CURRENT_VERSION,
        "owner": sanitize(str(info.owner)),
        "tokenRequester": sanitize(str(info.token_requester)),
        "renewers": [sanitize(str(r)) for r in info.renewers],
        "issueTimestamp": info.issue_timestamp,
        "maxTimestamp": info.max_timestamp,
        "expiryTimestamp": info.expiry_timestamp,
        "tokenId": info.token_id,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _principal(value: Any) -> KafkaPrincipal:
    if not isinstance(value, str):
        raise ValueError(f"expected a principal string, got {value!r}")
    return KafkaPrincipal.parse(desanitize(value))


def _long(body: dict[str, Any], key: str) -> int:
    value = body[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} must be a number, got {value!r}")
    return value


def decode_token_info(data: bytes | None) -> TokenInformation | None:
    """A token znode's information; None for empty data. ``ValueError`` for anything else that is
    not Kafka's JSON (a version outside 1..3, a missing key, a malformed principal)."""
    if not data:
        return None
    try:
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        version = body["version"]
        if not isinstance(version, int) or not 0 < version <= CURRENT_VERSION:
            raise ValueError(f"unsupported token version {version!r}")
        owner = _principal(body["owner"])
        requester = _principal(body["tokenRequester"]) if version >= 3 else owner
        renewers = body["renewers"]
        if not isinstance(renewers, list):
            raise ValueError("renewers must be a list")
        token_id = body["tokenId"]
        if not isinstance(token_id, str):
            raise ValueError("tokenId must be a string")
        return TokenInformation(
            token_id,
            owner,
            requester,
            tuple(_principal(r) for r in renewers),
            _long(body, "issueTimestamp"),
            _long(body, "maxTimestamp"),
            _long(body, "expiryTimestamp"),
        )
    except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"invalid delegation token znode: {exc}") from None


async def create_delegation_token_paths(store: CoordinationStore) -> None:
    """``createDelegationTokenPaths``: the changes and tokens folders (idempotent)."""
    await store.ensure_path(TOKEN_CHANGES_PATH)
    await store.ensure_path(TOKENS_PATH)


async def set_or_create_delegation_token(store: CoordinationStore, info: TokenInformation) -> None:
    """Write the token znode, creating it the first time."""
    path, data = token_info_path(info.token_id), encode_token_info(info)
    try:
        await store.set(path, data)
    except NoNodeError:
        try:
            await store.create(path, data, makepath=True)
        except NodeExistsError:
            await store.set(path, data)


async def delete_delegation_token(store: CoordinationStore, token_id: str) -> None:
    """Remove the token znode (nothing if it is already gone)."""
    try:
        await store.delete(token_info_path(token_id), recursive=True)
    except NoNodeError:
        pass


async def get_delegation_token_info(store: CoordinationStore, token_id: str) -> TokenInformation | None:
    """The stored information of a token, None when it has no znode (``ValueError`` if unreadable)."""
    try:
        data, _ = await store.get(token_info_path(token_id))
    except NoNodeError:
        return None
    return decode_token_info(data)


async def token_ids(store: CoordinationStore) -> list[str]:
    try:
        return await store.get_children(TOKENS_PATH)
    except NoNodeError:
        return []


async def create_token_change_notification(store: CoordinationStore, token_id: str) -> None:
    """``token_change_<seq>`` carrying the token id."""
    await store.create(
        f"{TOKEN_CHANGES_PATH}/{TOKEN_CHANGE_PREFIX}", token_id.encode("utf-8"), sequential=True, makepath=True
    )
