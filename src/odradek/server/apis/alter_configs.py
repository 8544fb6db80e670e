"""AlterConfigs (key 33): replace the config overrides of topics and the dynamic configs of brokers.

v0..v2. For a topic (resource type 2) the given entries become the topic's complete set of
overrides: keys left out go back to the broker's defaults. Each resource is answered on its own:

- UNKNOWN_TOPIC_OR_PARTITION (no such topic), INVALID_TOPIC_EXCEPTION (invalid name);
- INVALID_CONFIG: unknown key or a value of the wrong type or range (nothing is changed); on a
  broker resource (type 4: ``"<id>"`` or the cluster default ``""``) also a key that is not
  dynamic, with Kafka's text (see :mod:`odradek.server.dynamic_config`);
- INVALID_REQUEST: a key named twice, a null value, any other resource type.

A group (resource type 32, Kafka 4's group configs, :mod:`odradek.coordinator.group.group_config`)
is replaced the same way: INVALID_CONFIG for an unknown key ("Unknown group config name: k"), a bad
value or one outside the broker's bounds; INVALID_REQUEST for the empty group id. Its overrides
are written to ``/config/groups/<sanitized group>`` with a change notification, applied on this
broker at once and on the others at the notification; :func:`alter_group` is shared with
IncrementalAlterConfigs. Authorized as Kafka: ALTER_CONFIGS on the group (GROUP_AUTHORIZATION_FAILED).

With ``validate_only`` everything is checked and nothing written. A change is written to the
metadata store (``/config/topics/<topic>`` plus a change notification) and applied to this
broker's logs before the answer; other brokers apply it when they see the notification.
:func:`check_resource` and :func:`check_topic` are shared with IncrementalAlterConfigs.
Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from odradek.metadata.config_entities import sanitize
from odradek.metadata.config_znodes import ConfigType
from odradek.protocol.api_keys import ApiKey
from odradek.server.admin_manager import validate_topic_name
from odradek.server.apis.describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    check_group_name,
    topic_exists,
)
from odradek.server.auth_helper import AclOperation, config_refusal
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types import AlterConfigsRequest
    from odradek.server.apis.request_types_admin import AlterConfigsResource

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)


def check_resource(ctx: RequestContext, resource_type: int, names: Iterable[str]) -> None:
    """Raise for a resource that cannot be altered or a key named twice."""
    if resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP):
        raise InvalidRequestError(f"Unsupported resource type: {resource_type}")
    duplicates = sorted(name for name, n in Counter(names).items() if n > 1)
    if duplicates:
        raise InvalidRequestError(f"Error due to duplicate config keys: {', '.join(duplicates)}")


async def check_topic(ctx: RequestContext, name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION unless ``name`` is a topic."""
    validate_topic_name(name)
    if not await topic_exists(ctx.services, name):
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")


async def alter_topic(ctx: RequestContext, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Validate and (unless ``validate_only``) store ``overrides`` as the topic's overrides."""
    await check_topic(ctx, name)
    await ctx.services.admin.set_topic_overrides(name, dict(overrides), validate_only)


async def alter_group(ctx: RequestContext, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    """Validate and (unless ``validate_only``) store ``overrides`` as the group's overrides, then
    apply them here (the other brokers at the change notification)."""
    check_group_name(name)
    ctx.services.group_configs.validate(overrides)
    if validate_only:
        return
    await ctx.services.zk.set_entity_configs(ConfigType.GROUP, sanitize(name), dict(overrides))
    ctx.services.group_configs.update(name, overrides)


async def _alter(ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool) -> None:
    check_resource(ctx, resource.resource_type, (c.name for c in resource.configs))
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")
    overrides = {c.name: c.value for c in resource.configs if c.value is not None}
    if resource.resource_type == RESOURCE_BROKER:
        await ctx.services.set_broker_overrides(resource.resource_name, overrides, validate_only)
    elif resource.resource_type == RESOURCE_GROUP:
        await alter_group(ctx, resource.resource_name, overrides, validate_only)
    else:
        await alter_topic(ctx, resource.resource_name, overrides, validate_only)


async def answer_resources(
    ctx: RequestContext, alter: Callable[[RequestContext, Any, bool], Awaitable[None]], api_name: str
) -> Any:
    """Run ``alter`` on every resource of the request and answer each with its own error code
    (the response shape AlterConfigs and IncrementalAlterConfigs share)."""
    validate_only = bool(ctx.request.validate_only)
    responses = []
    for resource in ctx.request.resources:
        error, message = ErrorCode.none, None
        refusal = config_refusal(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
        try:
            if refusal is not None:
                error = refusal
            else:
                await alter(ctx, resource, validate_only)
        except KafkaError as exc:
            error, message = exc.error_code, str(exc) or None
        except Exception as exc:
            log.exception("%s of %s failed", api_name, resource.resource_name)
            error, message = ErrorCode.unknown_server_error, f"unexpected error: {exc}"
        responses.append(
            ctx.make(
                "AlterConfigsResourceResponse",
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), responses=tuple(responses))


async def handle(ctx: RequestContext[AlterConfigsRequest]) -> Any:
    return await answer_resources(ctx, _alter, "AlterConfigs")
