"""Kafka's topic creation and config alteration policies (``create.topic.policy.class.name``,
``alter.config.policy.class.name``) as Python classes.

A key's value names a class either as a dotted path (``mypackage.policies.NoWideTopics``, or
``mypackage.policies:NoWideTopics``) or as the name of an entry point in the
``odradek.policies`` group. The class is built with no arguments at broker start, its
``configure(configs)`` (if any) is called once with the broker's configuration as a
``dict[str, Any]``, and then, on the event loop, ``validate(metadata)`` is called for each topic
a CreateTopics creates (validate-only requests included) with a :class:`CreateTopicRequest`, and
for each topic an AlterConfigs or IncrementalAlterConfigs changes with an
:class:`AlterConfigRequest` (as Kafka's ZooKeeper-mode broker, broker resources are not
checked). Raising any exception refuses that topic with POLICY_VIOLATION and the exception's text
as the error message, as Kafka's ``PolicyViolationException``. ``validate`` must be quick: it runs
on the event loop.

As Kafka's ``RequestMetadata``: ``num_partitions`` and ``replication_factor`` are None when the
request gives an explicit assignment, ``replicas_assignments`` is None otherwise; ``configs``
are the request's overrides only.

A class that cannot be found or built fails broker start-up with InvalidConfigError.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

from odradek.configdef import ConfigDef
from odradek.errors import InvalidConfigError, PolicyViolationError

__all__ = [
    "POLICY_CONFIGS",
    "AlterConfigRequest",
    "CreateTopicRequest",
    "Policies",
    "load_policy",
]

CREATE_TOPIC_POLICY = "create.topic.policy.class.name"
ALTER_CONFIG_POLICY = "alter.config.policy.class.name"
ENTRY_POINT_GROUP = "odradek.policies"

POLICY_CONFIGS = (
    ConfigDef()
    .define(
        CREATE_TOPIC_POLICY,
        "string",
        None,
        "A class whose validate(CreateTopicRequest) checks every topic creation (POLICY_VIOLATION when it "
        "raises): a dotted Python path or an entry point of the group odradek.policies (see "
        "odradek.server.policies). Unset: no policy.",
    )
    .define(
        ALTER_CONFIG_POLICY,
        "string",
        None,
        "A class whose validate(AlterConfigRequest) checks every topic config change of AlterConfigs and "
        "IncrementalAlterConfigs (POLICY_VIOLATION when it raises); named as create.topic.policy.class.name. "
        "Unset: no policy.",
    )
)


@dataclass(frozen=True)
class CreateTopicRequest:
    topic: str
    num_partitions: int | None
    replication_factor: int | None
    replicas_assignments: Mapping[int, Sequence[int]] | None
    configs: Mapping[str, str]


@dataclass(frozen=True)
class AlterConfigRequest:
    resource_type: str
    """``"TOPIC"``."""
    resource_name: str
    configs: Mapping[str, str]


class Policy(Protocol):
    def validate(self, metadata: Any) -> None: ...


def load_policy(name: str, configs: Mapping[str, Any]) -> Policy:
    """Build and configure the class ``name`` names (see the module docstring)."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    try:
        if found:
            cls = found[0].load()
        else:
            module, sep, attr = name.partition(":") if ":" in name else name.rpartition(".")
            if not sep or not module:
                raise ImportError(f"{name!r} is not a dotted class path")
            cls = getattr(importlib.import_module(module), attr)
        policy = cls()
        configure = getattr(policy, "configure", None)
        if configure is not None:
            configure(dict(configs))
    except Exception as exc:
        raise InvalidConfigError(f"Cannot load policy class {name!r}: {exc}") from None
    if not callable(getattr(policy, "validate", None)):
        raise InvalidConfigError(f"Policy class {name!r} has no validate method")
    return policy  # type: ignore[no-any-return]


def _check(policy: Policy | None, metadata: object) -> None:
    if policy is None:
        return
    try:
        policy.validate(metadata)
    except PolicyViolationError:
        raise
    except Exception as exc:
        raise PolicyViolationError(str(exc) or type(exc).__name__) from None


class Policies:
    """The broker's two policies (None when unset). Built once; ``check_*`` on the event loop."""

    def __init__(self, configs: Mapping[str, Any]) -> None:
        create, alter = configs.get(CREATE_TOPIC_POLICY), configs.get(ALTER_CONFIG_POLICY)
        self.create_topic = load_policy(create, configs) if create else None
        self.alter_config = load_policy(alter, configs) if alter else None

    def check_create_topic(self, request: CreateTopicRequest) -> None:
        """Raise PolicyViolationError when the create topic policy refuses ``request``."""
        _check(self.create_topic, request)

    def check_alter_config(self, request: AlterConfigRequest) -> None:
        """Raise PolicyViolationError when the alter config policy refuses ``request``."""
        _check(self.alter_config, request)
