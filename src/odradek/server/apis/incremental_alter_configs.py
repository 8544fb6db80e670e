"""IncrementalAlterConfigs (key 44): change single config overrides of topics.

v0..v1. Each entry of a topic resource (type 2) applies one operation to the topic's overrides,
in request order, on top of the stored overrides:

- 0 SET: set the override (a null value is INVALID_REQUEST);
- 1 DELETE: remove the override (the broker default applies again; no error if it was not set);
- 2 APPEND / 3 SUBTRACT: only for list-typed keys (``cleanup.policy``), else INVALID_CONFIG.
  APPEND adds the comma-separated values not yet present to the current list, SUBTRACT removes
  them; the current list is the override, or the topic's effective value when there is none;
- any other operation: INVALID_REQUEST.

A broker resource (type 4) applies the operations to its stored dynamic configs the same way
(:mod:`odradek.server.dynamic_config`), a group (type 32) to its group configs
(:func:`~odradek.server.apis.alter_configs.alter_group`; no group key is a list, so APPEND and
SUBTRACT are INVALID_CONFIG there). Errors per resource as AlterConfigs:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (unknown key, bad value, a broker key that is not
dynamic), INVALID_REQUEST (a key named twice). ``validate_only`` checks without writing. Runs on the
broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.configdef import ConfigDef
from odradek.coordinator.group.group_config import GROUP_CONFIGS
from odradek.errors import InvalidConfigError, InvalidRequestError
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.alter_configs import alter_group, answer_resources, check_resource, check_topic
from odradek.server.apis.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    check_group_name,
    group_overrides,
    render_value,
)
from odradek.server.request import RequestContext
from odradek.storage.config import TOPIC_CONFIGS

if TYPE_CHECKING:
    from odradek.server.apis.request_types import IncrementalAlterConfigsRequest
    from odradek.server.apis.request_types_admin import IncrementalAlterConfigsResource

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def apply_operations(
    overrides: dict[str, str],
    defaults: dict[str, Any],
    ops: list[tuple[str, int, str | None]],
    table: ConfigDef = TOPIC_CONFIGS,
    kind: str = "topic",
) -> dict[str, str]:
    """The overrides after applying ``ops`` ((name, operation, value), in order).

    ``defaults`` gives the effective typed value of keys without an override (for APPEND and
    SUBTRACT); ``table`` the keys' types (``kind`` names it in errors). Raises
    InvalidRequestError / InvalidConfigError; values are validated later.
    """
    result = dict(overrides)
    for name, op, value in ops:
        if op not in OPERATION_NAMES:
            raise InvalidRequestError(f"Unknown alter config operation type {op} for {name}")
        if op == DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if op == SET:
            result[name] = value
            continue
        key = table.keys.get(name)
        if key is None:
            raise InvalidConfigError(f"Unknown {kind} config name: {name}")
        if key.type != "list":
            raise InvalidConfigError(
                f"Config value {OPERATION_NAMES[op].lower()} is not allowed for config key: {name}"
            )
        current = _split(result[name]) if name in result else _split(render_value(defaults.get(name)))
        if op == APPEND:
            current += [v for v in _split(value) if v not in current]
        else:
            removed = set(_split(value))
            current = [v for v in current if v not in removed]
        result[name] = ",".join(current)
    return result


async def _alter(ctx: RequestContext, resource: IncrementalAlterConfigsResource, validate_only: bool) -> None:
    check_resource(ctx, resource.resource_type, (c.name for c in resource.configs))
    name = resource.resource_name
    ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    if resource.resource_type == RESOURCE_BROKER:
        current = await ctx.services.broker_overrides(name)
        updated = apply_operations(current, {}, ops)
        await ctx.services.set_broker_overrides(name, updated, validate_only)
        return
    if resource.resource_type == RESOURCE_GROUP:
        check_group_name(name)
        current = await group_overrides(ctx.services, name)
        await alter_group(ctx, name, apply_operations(current, {}, ops, GROUP_CONFIGS, "group"), validate_only)
        return
    await check_topic(ctx, name)
    overrides = await ctx.services.admin.topic_overrides(name)
    updated = apply_operations(overrides, ctx.services.config.log_config_defaults(), ops)
    await ctx.services.admin.set_topic_overrides(name, updated, validate_only)


async def handle(ctx: RequestContext[IncrementalAlterConfigsRequest]) -> Any:
    return await answer_resources(ctx, _alter, "IncrementalAlterConfigs")
