"""Authorization of requests (Kafka's ``AuthHelper``), one call per check for the API modules.

Every check asks the broker's :class:`~odradek.metadata.authorizer.AclAuthorizer` (started when
``authorizer.class.name`` is set) about the request's principal and client host
(``ctx.session``); with no authorizer every check passes, except :func:`authorize_cluster_action`
(the inter-broker requests), which then holds those requests to the inter-broker listener.

- :func:`authorize` / :func:`authorize_cluster`: one operation on one resource (the cluster is
  named ``kafka-cluster``);
- :func:`filter_authorized`: the set of names among some items the principal may act on; with
  ``log_if_denied=False`` (Kafka's filtering questions: Metadata's "every topic", ListGroups)
  refusals are logged at DEBUG only;
- :func:`authorize_by_resource_type`: the operation on some resource of a type (InitProducerId);
- :func:`authorized_operations` / :func:`operations_field`: the 32-bit field of Kafka's
  ``*_authorized_operations`` (bit ``n`` for the :class:`~odradek.security.acl.AclOperation` with
  code ``n``; Kafka's ``Int.MinValue`` when the client did not ask);
- :func:`config_refusal`: DESCRIBE_CONFIGS / ALTER_CONFIGS on a topic, a group or the cluster;
- :func:`may_auto_create`: CREATE on the cluster or the topic, for Metadata and Produce;
- :func:`authorize_cluster_action`: the controller's requests (LeaderAndIsr, StopReplica,
  UpdateMetadata, ControlledShutdown) and WriteTxnMarkers: CLUSTER_ACTION on the cluster; with no
  authorizer, true only on the inter-broker listener (beyond Kafka: a client listener cannot send
  them). Followers' Fetch and OffsetForLeaderEpoch ask CLUSTER_ACTION through
  :func:`authorize_cluster`, which passes without an authorizer, as in Kafka.

Runs on the broker's event loop (the authorizer's cache is read synchronously).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from odradek.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType, authorization_error, supported_operations
from odradek.server.request import RequestContext

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "CLUSTER_AUTHORIZATION_MESSAGE",
    "CLUSTER_NAME",
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "authorize_cluster_action",
    "authorized_operations",
    "config_refusal",
    "filter_authorized",
    "has_authorizer",
    "may_auto_create",
    "operations_field",
]

T = TypeVar("T")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""Kafka's ``Int.MinValue``: the client did not ask for the authorized operations."""

CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."
"""Kafka's message of CLUSTER_AUTHORIZATION_FAILED, sent where a response has an error message
(clients such as librdkafka expect one with a top-level error)."""

_BITS_ORDER = sorted(AclOperation, key=int)


def has_authorizer(ctx: RequestContext) -> bool:
    return ctx.services.authorizer is not None


def authorize(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    log_if_denied: bool = True,
) -> bool:
    """Whether the request's principal may do ``operation`` on the literal resource ``name``."""
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    session = ctx.session
    return authorizer.authorize(
        session.principal, session.client_host, operation, resource_type, name, log_if_denied=log_if_denied
    )


def authorize_by_resource_type(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether the principal may do ``operation`` on some resource of ``resource_type``."""
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    session = ctx.session
    return authorizer.authorize_by_resource_type(session.principal, session.client_host, operation, resource_type)


def authorize_cluster(ctx: RequestContext, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    """``operation`` on the one CLUSTER resource (``kafka-cluster``)."""
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def filter_authorized(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    items: Iterable[T],
    name_of: Callable[[T], str] = str,
    *,
    log_if_denied: bool = True,
) -> set[str]:
    """The names among ``items`` (each named by ``name_of``) the principal may act on; each
    distinct name is asked once."""
    names = {name_of(item) for item in items}
    if ctx.services.authorizer is None:
        return names
    return {n for n in names if authorize(ctx, operation, resource_type, n, log_if_denied=log_if_denied)}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The operations of ``resource_type`` the principal may do on ``name``, as Kafka's bit field."""
    field = 0
    for operation in _BITS_ORDER:
        if operation in supported_operations(resource_type) and authorize(
            ctx, operation, resource_type, name, log_if_denied=False
        ):
            field |= 1 << int(operation)
    return field


def may_auto_create(ctx: RequestContext, name: str) -> bool:
    """Whether a Metadata or Produce request may auto-create topic ``name``: CREATE on the cluster
    or on the topic (asked only when ``auto.create.topics.enable`` is set)."""
    if ctx.services.authorizer is None or not ctx.services.config["auto.create.topics.enable"]:
        return True
    return authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False) or authorize(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


_CONFIG_RESOURCES = {2: ResourceType.TOPIC, 4: ResourceType.CLUSTER, 8: ResourceType.CLUSTER, 32: ResourceType.GROUP}
"""DescribeConfigs/AlterConfigs resource types (TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32) to
the ACL resource their authorization asks about."""


def config_refusal(
    ctx: RequestContext, operation: AclOperation, config_resource_type: int, name: str
) -> ErrorCode | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource: on the topic for a topic
    (TOPIC_AUTHORIZATION_FAILED), on the group for a group (GROUP_AUTHORIZATION_FAILED), on the
    cluster for a broker or broker logger (CLUSTER_AUTHORIZATION_FAILED); None when allowed or for
    another type (refused elsewhere)."""
    resource_type = _CONFIG_RESOURCES.get(config_resource_type)
    if resource_type is None:
        return None
    acl_name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name
    if authorize(ctx, operation, resource_type, acl_name):
        return None
    return authorization_error(resource_type)


def operations_field(ctx: RequestContext, include: bool, resource_type: ResourceType, name: str) -> int:
    """An ``*_authorized_operations`` response field: :func:`authorized_operations` when the
    client asked for it (``include``), else Kafka's ``Int.MinValue``."""
    return authorized_operations(ctx, resource_type, name) if include else AUTHORIZED_OPERATIONS_OMITTED


def authorize_cluster_action(ctx: RequestContext) -> bool:
    """An inter-broker request: CLUSTER_ACTION on the cluster with an authorizer, else only on
    the inter-broker listener (a broker with one listener serves them there, as before)."""
    if ctx.services.authorizer is not None:
        return authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    return ctx.session.listener_name == ctx.services.config.inter_broker_listener_name
