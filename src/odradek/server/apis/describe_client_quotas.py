"""DescribeClientQuotas (key 48): the quotas stored under ``/config/users`` and ``/config/clients``
(and ``/config/ips``), filtered as Kafka's ``ZkAdminManager.describeClientQuotas``.

v0..v1. Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED). Each filter
component names an entity type (``user``, ``client-id``, ``ip``) and a match: 0 EXACT (``match``
is the name), 1 DEFAULT (the ``<default>`` entity), 2 SPECIFIED (any entity of that type, the
default included). An entity matches when every component matches its part of the same type;
with ``strict`` it must have no other part, without it a part without component is free. Only
entities with a quota key are listed; a default part is answered with a null name. A duplicate
type, an empty type or ``ip`` together with ``user``/``client-id`` is INVALID_REQUEST, an unknown
type UNSUPPORTED_VERSION ("Custom entity type 'x' not supported"). Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, InvalidRequestError, KafkaError, UnsupportedVersionError
from odradek.metadata.config_entities import (
    fetch_all_child_entity_configs,
    fetch_all_entity_configs,
)
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, AclOperation, authorize_cluster
from odradek.server.client_quotas import IP_QUOTA_KEYS, QUOTA_KEYS, describe_name
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from collections.abc import Iterable

    from odradek.server.apis.request_types_admin import ClientQuotaFilterComponent, DescribeClientQuotasRequest

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

log = logging.getLogger(__name__)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
EXACT, DEFAULT, SPECIFIED = 0, 1, 2

Entity = dict[str, str | None]


def _filters(components: Iterable[ClientQuotaFilterComponent]) -> dict[str, tuple[int, str | None]]:
    found: dict[str, tuple[int, str | None]] = {}
    for c in components:
        if c.entity_type == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersionError(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in found:
            kind = "client" if c.entity_type == CLIENT_ID else c.entity_type
            raise InvalidRequestError(f"Duplicate {kind} filter component entity type")
        found[c.entity_type] = (int(c.match_type), c.match)
    if IP in found and (USER in found or CLIENT_ID in found):
        raise InvalidRequestError(
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component."
        )
    return found


def matches(filters: dict[str, tuple[int, str | None]], entity: Entity, strict: bool) -> bool:
    """Whether ``entity`` (type -> name, None for the default) passes the filter components."""
    for entity_type, (match_type, match) in filters.items():
        if entity_type not in entity:
            return False
        name = entity[entity_type]
        if match_type == EXACT and name != match:
            return False
        if match_type == DEFAULT and name is not None:
            return False
    return not strict or set(entity) <= set(filters)


async def stored_quota_entities(ctx: RequestContext) -> list[tuple[Entity, dict[str, float]]]:
    """Every stored entity with quota keys: ({type: name or None}, {key: value})."""
    store = ctx.services.zk.store
    found: list[tuple[Entity, dict[str, str]]] = []
    for name, config in (await fetch_all_entity_configs(store, "users")).items():
        found.append(({USER: describe_name(name)}, config))
    for path, config in (await fetch_all_child_entity_configs(store, "users", "clients")).items():
        user, _, client = path.partition("/clients/")
        found.append(({USER: describe_name(user), CLIENT_ID: describe_name(client)}, config))
    for name, config in (await fetch_all_entity_configs(store, "clients")).items():
        found.append(({CLIENT_ID: describe_name(name)}, config))
    for name, config in (await fetch_all_entity_configs(store, "ips")).items():
        found.append(({IP: describe_name(name)}, config))
    out = []
    for entity, config in found:
        keys = IP_QUOTA_KEYS if IP in entity else QUOTA_KEYS
        values = {}
        for k, v in config.items():
            if k in keys:
                try:
                    values[k] = float(v)
                except ValueError:
                    continue
        if values:
            out.append(({t: (None if n == "<default>" else n) for t, n in entity.items()}, values))
    return out


async def handle(ctx: RequestContext[DescribeClientQuotasRequest]) -> Any:
    throttle = datetime.timedelta(0)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return ctx.response(
            throttle_time=throttle,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=CLUSTER_AUTHORIZATION_MESSAGE,
            entries=None,
        )
    try:
        filters = _filters(ctx.request.components)
        strict = bool(ctx.request.strict)
        entries = [
            ctx.make(
                "EntryData",
                entity=tuple(ctx.make("EntityData", entity_type=t, entity_name=n) for t, n in sorted(entity.items())),
                values=tuple(ctx.make("ValueData", key=k, value=v) for k, v in sorted(values.items())),
            )
            for entity, values in await stored_quota_entities(ctx)
            if matches(filters, entity, strict)
        ]
    except KafkaError as exc:
        return ctx.response(throttle_time=throttle, error_code=exc.error_code, error_message=str(exc), entries=None)
    except Exception as exc:  # the metadata store failed, or a stored entity is not JSON
        log.exception("DescribeClientQuotas failed")
        error = ErrorCode.unknown_server_error
        return ctx.response(
            throttle_time=throttle, error_code=error, error_message=f"unexpected error: {exc}", entries=None
        )
    return ctx.response(throttle_time=throttle, error_code=ErrorCode.none, error_message=None, entries=tuple(entries))
