"""``odradek configs --bootstrap-server`` for topics, brokers and groups, as Kafka's
``ConfigCommand`` does it through the admin client.

``--describe``: per entity ``Dynamic configs for topic t are:`` (``All configs for ...`` with
``--all``; ``Default configs for brokers in the cluster are:`` for the default broker entity), then
one line per key, sorted: ``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, ...}``. Only
the keys whose source is the entity's dynamic source (a group's: GROUP_CONFIG) are shown unless
``--all``. Without ``--entity-name`` every topic (internal ones too), every live broker and the
default, or every group ListGroups shows.

``--alter``: topics and groups through IncrementalAlterConfigs (SET and DELETE), brokers through
AlterConfigs with the broker's dynamic keys plus the added ones minus the deleted ones; deleting a
key that is not a dynamic override fails with ``Invalid config(s): k``. Prints ``Completed updating
config for topic t.`` (``group g``) or ``Completed updating default config for brokers in the
cluster.``
"""

from __future__ import annotations

from odradek.cli.common import CommandError
from odradek.client.admin import AdminClient, AlterConfigOp, ConfigEntry, ConfigResource
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity

__all__ = ["alter_with_admin", "describe_with_admin"]

CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
"""DescribeConfigs ``config_source`` numbers by the admin client's ``ConfigEntry.ConfigSource`` names."""


def _resource(entity_type: str, name: str) -> tuple[ConfigResource, int]:
    """The resource and its dynamic config source."""
    if entity_type == "topics":
        return ConfigResource.topic(name), 1
    if entity_type == "groups":
        return ConfigResource.group(name), 8
    return ConfigResource.broker(name), (3 if name == "" else 2)


async def _entries(admin: AdminClient, entity_type: str, name: str, describe_all: bool) -> list[ConfigEntry]:
    resource, dynamic = _resource(entity_type, name)
    result = (await admin.describe_configs([resource], include_synonyms=True))[resource]
    if result.error is not None:
        raise result.error
    entries = sorted(result.configs.values(), key=lambda e: e.name)
    return entries if describe_all else [e for e in entries if e.source == dynamic]


def _value(value: str | None) -> str:
    return "null" if value is None else value


async def describe_with_admin(
    bootstrap: str,
    entity_type: str,
    name: str | None,
    describe_all: bool,
    security: ClientSecurity = PLAINTEXT_SECURITY,
) -> None:
    async with AdminClient(bootstrap, security=security) as admin:
        if name is not None:
            names = [name]
        elif entity_type == "topics":
            names = await admin.list_topics(include_internal=True)
        elif entity_type == "groups":
            from odradek.cli.consumer_groups import GroupsClient

            names = [g.group_id for g in await GroupsClient(admin).list_groups()]
        else:
            names = [str(b[0]) for b in (await admin.describe_cluster()).brokers] + [""]
        for entity in names:
            if entity == "":
                print(f"Default configs for {entity_type} in the cluster are:")
            else:
                print(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {entity} are:")
            for e in await _entries(admin, entity_type, entity, describe_all):
                synonyms = ", ".join(
                    f"{CONFIG_SOURCES.get(src, 'UNKNOWN')}:{n}={_value(v)}" for n, v, src in e.synonyms
                )
                print(f"  {e.name}={_value(e.value)} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")


async def alter_with_admin(
    bootstrap: str,
    entity_type: str,
    name: str,
    added: dict[str, str],
    deleted: list[str],
    security: ClientSecurity = PLAINTEXT_SECURITY,
) -> None:
    async with AdminClient(bootstrap, security=security) as admin:
        old = {e.name: e for e in await _entries(admin, entity_type, name, describe_all=False)}
        invalid = [k for k in deleted if k not in old]
        if invalid:
            raise CommandError(f"Invalid config(s): {','.join(invalid)}")
        resource, _ = _resource(entity_type, name)
        if entity_type in ("topics", "groups"):
            ops = [AlterConfigOp(k, AlterConfigOp.SET, v) for k, v in added.items()]
            ops += [AlterConfigOp(k, AlterConfigOp.DELETE) for k in deleted]
            errors = await admin.incremental_alter_configs({resource: ops})
        else:
            new = {k: e.value for k, e in old.items() if k not in deleted}
            new.update(added)
            sensitive = sorted(k for k, v in new.items() if v is None)
            if sensitive:
                raise CommandError(
                    f"All sensitive broker config entries must be specified for --alter, missing entries: {sensitive}"
                )
            errors = await admin.alter_configs({resource: {k: v for k, v in new.items() if v is not None}})
        error = errors.get(resource)
        if error is not None:
            raise error
    if name:
        print(f"Completed updating config for {entity_type[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {entity_type} in the cluster.")
