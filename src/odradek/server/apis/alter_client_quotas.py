"""AlterClientQuotas (key 49): set or remove quotas of users, client ids and IPs, as Kafka's
``ZkAdminManager.alterClientQuotas``.

v0..v1. Needs ALTER_CONFIGS on the cluster (each entry CLUSTER_AUTHORIZATION_FAILED otherwise).
An entry's entity has a ``user`` and/or ``client-id`` part, or one ``ip`` part; a null name is the
``<default>`` entity. It is stored at ``/config/users/<u>``, ``/config/users/<u>/clients/<c>``,
``/config/clients/<c>`` or ``/config/ips/<ip>`` (names sanitized), merged with the keys already
there (SCRAM credentials stay), followed by a change notification; the answering broker applies
it before answering, the others on the notice. Per entry, INVALID_REQUEST for: an empty entity
(``Invalid empty client quota entity``), an empty name (``Empty user not supported``), an unknown
type, ``ip`` with another part, a key that is not a quota of that entity (``Invalid
configuration key k``), or a fractional value of an integer key (``Configuration
producer_byte_rate must be a LONG value``). ``remove`` deletes the key; ``validate_only``
checks without writing. Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, InvalidRequestError, KafkaError
from odradek.metadata.config_entities import DEFAULT_ENTITY, alter_entity_config, sanitize
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, AclOperation, authorize_cluster
from odradek.server.client_quotas import QUOTA_KEY_TYPES
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from collections.abc import Sequence

    from odradek.server.apis.request_types_admin import (
        AlterClientQuotasRequest,
        ClientQuotaAlteration,
        ClientQuotaEntity,
    )

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

EPSILON = 1e-6

log = logging.getLogger(__name__)


def entity_path(entity: Sequence[ClientQuotaEntity]) -> tuple[str, str]:
    """(entity type, sanitized entity name) of the ``/config`` znode for a request entity."""
    if not entity:
        raise InvalidRequestError("Invalid empty client quota entity")
    parts: dict[str, str] = {}
    for e in entity:
        if e.entity_type not in ("user", "client-id", "ip"):
            raise InvalidRequestError(f"Unhandled client quota entity type: {e.entity_type}")
        if e.entity_name is not None and e.entity_name == "":
            raise InvalidRequestError(f"Empty {e.entity_type} not supported")
        parts[e.entity_type] = DEFAULT_ENTITY if e.entity_name is None else sanitize(e.entity_name)
    if "ip" in parts:
        if len(parts) > 1:
            raise InvalidRequestError(
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
            )
        return "ips", parts["ip"]
    if "user" in parts and "client-id" in parts:
        return "users", f"{parts['user']}/clients/{parts['client-id']}"
    if "user" in parts:
        return "users", parts["user"]
    return "clients", parts["client-id"]


def quota_value(entity_type: str, key: str, value: float) -> str:
    """The stored text of one quota value (Kafka's type checks)."""
    kind = QUOTA_KEY_TYPES.get((entity_type == "ips", key))
    if kind is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if kind == "double":
        return str(float(value))
    integral = int(value + EPSILON)
    if abs(integral - value) > EPSILON:
        raise InvalidRequestError(f"Configuration {key} must be a {kind.upper()} value")
    return str(integral)


async def _alter(ctx: RequestContext, entry: ClientQuotaAlteration, validate_only: bool) -> None:
    entity_type, name = entity_path(entry.entity)
    sets = {op.key: quota_value(entity_type, op.key, float(op.value)) for op in entry.ops if not op.remove}
    for op in entry.ops:
        if op.remove:
            quota_value(entity_type, op.key, 0.0)  # the key must still be a quota key
    removes = [op.key for op in entry.ops if op.remove]
    if validate_only:
        return
    written = await alter_entity_config(ctx.services.zk.store, entity_type, name, sets, removes)
    ctx.services.client_quotas.entity_changed(entity_type, name, written)


async def handle(ctx: RequestContext[AlterClientQuotasRequest]) -> Any:
    allowed = authorize_cluster(ctx, AclOperation.ALTER_CONFIGS)
    validate_only = bool(ctx.request.validate_only)
    entries = []
    for entry in ctx.request.entries:
        error, message = ErrorCode.none, None
        if not allowed:
            error, message = ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_MESSAGE
        else:
            try:
                await _alter(ctx, entry, validate_only)
            except KafkaError as exc:
                error, message = exc.error_code, str(exc)
            except Exception as exc:  # the metadata store failed: this entry only
                log.exception("AlterClientQuotas of %s failed", entry.entity)
                error, message = ErrorCode.unknown_server_error, f"unexpected error: {exc}"
        entries.append(
            ctx.make(
                "EntryData",
                error_code=error,
                error_message=message,
                entity=tuple(
                    ctx.make("EntityData", entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
                ),
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), entries=tuple(entries))
