"""SCRAM credentials under ``/config/users/<user>``, as Kafka's ZooKeeper-mode brokers keep them.

A user's entity (:mod:`.config_entities`, name sanitized) holds one key per mechanism::

    {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

beside any quota keys of the same user (writes merge). Passwords never reach ZooKeeper: the tool
hashes them (:func:`upsert_password_credentials`), and AlterUserScramCredentials carries the salted
password from the client.

- :class:`CredentialCache` is Kafka's ``CredentialProvider``: brokers load every user at start and
  follow ``/config/changes`` through :class:`~odradek.metadata.config_entities.ZkConfigManager`
  (register :meth:`CredentialCache.process_config_changes` as the ``users`` handler);
  :meth:`CredentialCache.lookup` is what a ``ScramSaslServer`` is given.
- :func:`alter_user_scram_credentials` / :func:`describe_user_scram_credentials` are
  ``ZkAdminManager.alterUserScramCredentials`` / ``describeUserScramCredentials``: per-user results
  with Kafka's error codes and messages, for the AlterUserScramCredentials (51) and
  DescribeUserScramCredentials (50) APIs. Mechanism numbers are the public ``ScramMechanism``
  types: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 UNKNOWN).

Loop-only, like the store; :meth:`CredentialCache.lookup` from the loop's thread.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.errors import ErrorCode, KafkaError
from odradek.metadata.config_entities import (
    DEFAULT_ENTITY,
    alter_entity_config,
    desanitize,
    fetch_all_entity_configs,
    fetch_entity_config,
    sanitize,
)
from odradek.metadata.config_znodes import ConfigType
from odradek.metadata.store import CoordinationStore
from odradek.security.delegation_token import TokenCache
from odradek.security.sasl import SCRAM_SHA_256, SCRAM_SHA_512
from odradek.security.sasl.scram import (
    MECHANISMS,
    ScramCredential,
    TokenLogin,
    credential_from_salted_password,
    generate_credential,
)

__all__ = [
    "MECHANISM_TYPES",
    "AlterUserScramCredentialsResult",
    "CredentialCache",
    "DescribeUserScramCredentialsResponse",
    "DescribeUserScramCredentialsResult",
    "ScramCredentialDeletion",
    "ScramCredentialUpsertion",
    "alter_user_scram_credentials",
    "describe_user_scram_credentials",
    "upsert_password_credentials",
]

log = logging.getLogger(__name__)

MECHANISM_TYPES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
"""Public ``ScramMechanism`` type numbers, as AlterUserScramCredentials sends them."""
_MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}
MAX_ITERATIONS = 16384


class CredentialCache:
    """User -> mechanism -> :class:`ScramCredential`, fed by the ``users`` config entities."""

    def __init__(self) -> None:
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        self.tokens = TokenCache()
        """The delegation tokens' SCRAM credentials (Kafka's ``CredentialProvider.tokenCache``), kept
        by the broker's :class:`~odradek.server.delegation_token_manager.DelegationTokenManager`."""

    def process_config_changes(self, entity_name: str, config: Mapping[str, str]) -> None:
        """``UserConfigHandler``: ``<user>`` entities update the user's credentials (a mechanism
        absent from ``config`` is removed); ``<user>/clients/<c>`` and ``<default>`` carry none."""
        parts = entity_name.split("/")
        if len(parts) not in (1, 3):
            raise ValueError(f"Invalid quota entity path: {entity_name}")
        if len(parts) == 3 or parts[0] == DEFAULT_ENTITY:
            return
        self.update_credentials(desanitize(parts[0]), config)

    def update_credentials(self, user: str, config: Mapping[str, str]) -> None:
        found = {}
        for name in MECHANISMS:
            value = config.get(name)
            if value is None:
                continue
            try:
                found[name] = ScramCredential.from_string(value)
            except ValueError:
                log.warning("ignoring an unreadable %s credential of user %s", name, user)
        if found:
            self._credentials[user] = found
        else:
            self._credentials.pop(user, None)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def lookup(self, mechanism: str) -> Callable[[str], ScramCredential | None]:
        """The credential lookup a ``ScramSaslServer(mechanism, ...)`` takes."""
        return lambda user: self.credential(user, mechanism)

    def token_lookup(self, mechanism: str) -> Callable[[str], TokenLogin | None]:
        """The delegation token lookup a ``ScramSaslServer(mechanism, ..., tokens=...)`` takes
        (Kafka's ``ScramServerCallbackHandler`` with a ``DelegationTokenCredentialCallback``)."""

        def find(token_id: str) -> TokenLogin | None:
            info = self.tokens.token(token_id)
            if info is None:
                return None
            return TokenLogin(info.owner.name, info.expiry_timestamp, self.tokens.credential(mechanism, token_id))

        return find

    def users(self) -> list[str]:
        return sorted(self._credentials)

    async def load(self, store: CoordinationStore) -> None:
        """Every user's credentials, as a broker reads them at start."""
        for name, config in (await fetch_all_entity_configs(store, ConfigType.USER)).items():
            self.process_config_changes(name, config)


# --- AlterUserScramCredentials / DescribeUserScramCredentials ----------------------------------


@dataclass(frozen=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class DescribeUserScramCredentialsResult:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    credential_infos: list[tuple[int, int]] = field(default_factory=list)
    """(mechanism type, iterations) per stored mechanism, SCRAM-SHA-256 first."""


@dataclass
class DescribeUserScramCredentialsResponse:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    results: list[DescribeUserScramCredentialsResult] = field(default_factory=list)


USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


def _error_of(exc: Exception) -> tuple[ErrorCode, str | None]:
    if isinstance(exc, KafkaError):
        return exc.error_code, str(exc)
    return ErrorCode.unknown_server_error, None


async def alter_user_scram_credentials(
    store: CoordinationStore,
    upsertions: Sequence[ScramCredentialUpsertion],
    deletions: Sequence[ScramCredentialDeletion],
) -> list[AlterUserScramCredentialsResult]:
    """``ZkAdminManager.alterUserScramCredentials``: one result per user named, in Kafka's order
    (illegal requests, users altering one mechanism twice, deletions of missing credentials,
    failed writes, then the users altered).

    Illegal: an empty name (UNACCEPTABLE_CREDENTIAL "Username must not be empty"), an unknown
    mechanism (UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism"), iterations below the
    mechanism's 4096 or above 16384 (UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many
    iterations"). A user with two operations on one mechanism: DUPLICATE_RESOURCE. Deleting a
    mechanism the user lacks: RESOURCE_NOT_FOUND. A user's operations are applied together, merged
    into the user's entity (quota keys stay).
    """
    illegal: dict[str, str] = {}
    for d in deletions:
        if not d.name:
            illegal[d.name] = USERNAME_MUST_NOT_BE_EMPTY
        elif d.mechanism not in _MECHANISM_NAMES:
            illegal[d.name] = UNKNOWN_MECHANISM
    for u in upsertions:
        if not u.name:
            illegal[u.name] = USERNAME_MUST_NOT_BE_EMPTY
        elif u.mechanism not in _MECHANISM_NAMES:
            illegal[u.name] = UNKNOWN_MECHANISM
        elif u.iterations < MECHANISMS[_MECHANISM_NAMES[u.mechanism]].min_iterations:
            illegal[u.name] = "Too few iterations"
        elif u.iterations > MAX_ITERATIONS:
            illegal[u.name] = "Too many iterations"
    results = [
        AlterUserScramCredentialsResult(
            user,
            ErrorCode.unsupported_sasl_mechanism if message == UNKNOWN_MECHANISM else ErrorCode.unacceptable_credential,
            message,
        )
        for user, message in illegal.items()
    ]
    ops: list[ScramCredentialUpsertion | ScramCredentialDeletion] = [*upsertions, *deletions]
    pairs = [(op.name, op.mechanism) for op in ops if op.name not in illegal]
    duplicated = list(dict.fromkeys(user for (user, _), count in Counter(pairs).items() if count > 1))
    results += [
        AlterUserScramCredentialsResult(
            user, ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
        )
        for user in duplicated
    ]
    candidates = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
    configs = {user: await fetch_entity_config(store, ConfigType.USER, sanitize(user)) for user in candidates}
    missing = list(
        dict.fromkeys(
            d.name for d in deletions if d.name in configs and _MECHANISM_NAMES[d.mechanism] not in configs[d.name]
        )
    )
    results += [
        AlterUserScramCredentialsResult(
            user, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        )
        for user in missing
    ]
    failed: list[AlterUserScramCredentialsResult] = []
    altered: list[AlterUserScramCredentialsResult] = []
    for user in (u for u in candidates if u not in missing):
        try:
            updates = {
                _MECHANISM_NAMES[u.mechanism]: credential_from_salted_password(
                    _MECHANISM_NAMES[u.mechanism], u.salt, u.salted_password, u.iterations
                ).to_string()
                for u in upsertions
                if u.name == user
            }
            removed = [_MECHANISM_NAMES[d.mechanism] for d in deletions if d.name == user]
            await alter_entity_config(store, ConfigType.USER, sanitize(user), updates, removed)
        except Exception as exc:
            log.info("error altering the SCRAM credentials of %s: %s", user, exc)
            failed.append(AlterUserScramCredentialsResult(user, *_error_of(exc)))
            continue
        altered.append(AlterUserScramCredentialsResult(user))
    return results + failed + altered


def _describe_one(user: str, config: Mapping[str, str], explicit: bool) -> DescribeUserScramCredentialsResult | None:
    present = [name for name in MECHANISM_TYPES if name in config]
    if not present:
        if not explicit:
            return None
        return DescribeUserScramCredentialsResult(
            user,
            ErrorCode.resource_not_found,
            f"Attempt to describe a user credential that does not exist: {user}",
        )
    result = DescribeUserScramCredentialsResult(user)
    try:
        result.credential_infos = [
            (MECHANISM_TYPES[name], ScramCredential.from_string(config[name]).iterations) for name in present
        ]
    except ValueError as exc:
        result.error_code, result.error_message = ErrorCode.unknown_server_error, str(exc)
    return result


async def describe_user_scram_credentials(
    store: CoordinationStore, users: Sequence[str] | None
) -> DescribeUserScramCredentialsResponse:
    """``ZkAdminManager.describeUserScramCredentials``: ``users`` None or empty describes every
    user with a credential (sorted); else one result per distinct user asked, in the order asked:
    an empty name RESOURCE_NOT_FOUND, a name asked twice DUPLICATE_RESOURCE, a user without
    credentials RESOURCE_NOT_FOUND."""
    response = DescribeUserScramCredentialsResponse()
    try:
        if not users:
            found = {}
            for name, config in (await fetch_all_entity_configs(store, ConfigType.USER)).items():
                result = _describe_one(desanitize(name), config, explicit=False)
                if result is not None:
                    found[result.user] = result
            response.results = [found[user] for user in sorted(found)]
            return response
        counts = Counter(users)
        for user in dict.fromkeys(users):
            if not user:
                response.results.append(
                    DescribeUserScramCredentialsResult(user, ErrorCode.resource_not_found, USERNAME_MUST_NOT_BE_EMPTY)
                )
            elif counts[user] > 1:
                message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                response.results.append(DescribeUserScramCredentialsResult(user, ErrorCode.duplicate_resource, message))
            else:
                config = await fetch_entity_config(store, ConfigType.USER, sanitize(user))
                result = _describe_one(user, config, explicit=True)
                assert result is not None
                response.results.append(result)
    except Exception as exc:
        log.error("Error processing describe user SCRAM credential configs request: %s", exc)
        response.error_code, response.error_message = _error_of(exc)
        response.results = []
    return response


async def upsert_password_credentials(
    store: CoordinationStore,
    user: str,
    passwords: Mapping[str, tuple[str, int]],
    deletions: Iterable[str] = (),
    *,
    entity_name: str | None = None,
) -> dict[str, str]:
    """Hash each ``mechanism -> (password, iterations)`` into a new credential (fresh salt) and
    merge it, with the mechanisms in ``deletions`` removed, into the user's entity (kafka-configs'
    ``--zookeeper`` path); the entity's config afterwards."""
    updates = {name: generate_credential(name, pw, rounds).to_string() for name, (pw, rounds) in passwords.items()}
    name = sanitize(user) if entity_name is None else entity_name
    return await alter_entity_config(store, ConfigType.USER, name, updates, deletions, require_existing=True)
