"""``odradek configs --bootstrap-server --entity-type users``: SCRAM credentials through the
brokers' AlterUserScramCredentials and DescribeUserScramCredentials, as Kafka's ``ConfigCommand``.

``--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` is hashed here, as Kafka's
admin client does: a fresh salt, the salted password (RFC 5802 ``Hi``) sent, never the password.
``--delete-config SCRAM-SHA-512`` removes a mechanism. Output lines as Kafka's tool:
``Completed updating config for user alice.`` and ``SCRAM credential configs for user-principal
'alice' are SCRAM-SHA-256=iterations=8192``. Quota keys go to :mod:`odradek.cli.configs_quotas`.
Event loop only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from odradek.cli.common import CommandError
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.metadata.scram_credentials import MECHANISM_TYPES
from odradek.protocol.api_keys import ApiKey
from odradek.security.sasl.scram import DEFAULT_ITERATIONS, mechanism, secure_random_string

__all__ = ["alter_users_with_admin", "describe_users_with_admin", "parse_scram_input"]

_NAMES = {code: name for name, code in MECHANISM_TYPES.items()}


def parse_scram_input(mechanism_name: str, text: str) -> tuple[str, int]:
    """``[iterations=N,]password=P`` (the tool's input syntax) as (password, iterations)."""
    m = re.fullmatch(r"(?:iterations=([0-9]*),)?password=(.*)", text, re.S)
    if m is None:
        raise CommandError(f"Invalid credential property {mechanism_name}={text}")
    return m[2], int(m[1]) if m[1] else DEFAULT_ITERATIONS


async def alter_users_with_admin(bootstrap: str, user: str, added: Mapping[str, str], deleted: Sequence[str]) -> None:
    async with AdminClient(bootstrap) as admin:
        conn = await admin.cluster.controller_connection()
        rb = conn.builder(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
        upsertions = []
        for name, text in added.items():
            password, iterations = parse_scram_input(name, text)
            salt = secure_random_string().encode()
            upsertions.append(
                rb.make(
                    "ScramCredentialUpsertion",
                    name=user,
                    mechanism=MECHANISM_TYPES[name],
                    iterations=iterations,
                    salt=salt,
                    salted_password=mechanism(name).salted_password(password, salt, iterations),
                )
            )
        deletions = tuple(rb.make("ScramCredentialDeletion", name=user, mechanism=MECHANISM_TYPES[n]) for n in deleted)
        response = await conn.send(rb(deletions=deletions, upsertions=tuple(upsertions)))
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise CommandError(result.error_message or ErrorCode(result.error_code).name.upper())
    print(f"Completed updating config for user {user}.")


async def scram_users(admin: AdminClient, user: str | None = None) -> list[tuple[str, list[tuple[str, int]]]]:
    """(user, [(mechanism, iterations)]) of every user with SCRAM credentials (or just ``user``),
    by DescribeUserScramCredentials; users without credentials are left out. Shared with the console."""
    conn = await admin.cluster.any_connection()
    rb = conn.builder(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    users = None if user is None else (rb.make("UserName", name=user),)
    response = await conn.send(rb(users=users))
    if response.error_code != ErrorCode.none:
        raise CommandError(response.error_message or ErrorCode(response.error_code).name.upper())
    out = []
    for result in response.results:
        if result.error_code == ErrorCode.resource_not_found:
            continue  # a user without credentials: nothing to show
        if result.error_code != ErrorCode.none:
            raise CommandError(result.error_message or ErrorCode(result.error_code).name.upper())
        out.append((result.user, [(_NAMES[int(i.mechanism)], int(i.iterations)) for i in result.credential_infos]))
    return out


async def describe_users_with_admin(bootstrap: str, user: str | None) -> None:
    async with AdminClient(bootstrap) as admin:
        users = await scram_users(admin, user)
    for name, infos in users:
        shown = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in infos)
        print(f"SCRAM credential configs for user-principal '{name}' are {shown}")
