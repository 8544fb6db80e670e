"""AlterUserScramCredentials (key 51): add, replace or remove users' SCRAM credentials.

v0. Needs ALTER on the cluster (every user CLUSTER_AUTHORIZATION_FAILED) and, as Kafka's
ZooKeeper mode, the active controller (every user NOT_CONTROLLER elsewhere). The client sends
the salt and the salted password (never the password); the broker stores
``salt=...,stored_key=...,server_key=...,iterations=N`` under the mechanism's name in
``/config/users/<user>``, merged with the entity's other keys, and writes a
``/config/changes`` notice so every broker's credential cache follows. Per-user results as
:func:`odradek.metadata.scram_credentials.alter_user_scram_credentials`. Runs on the broker's
event loop.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.metadata.scram_credentials import (
    AlterUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alter_user_scram_credentials,
)
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, authorize_cluster
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import AlterUserScramCredentialsRequest

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[AlterUserScramCredentialsRequest]) -> Any:
    req = ctx.request
    users = list(dict.fromkeys([*(u.name for u in req.upsertions), *(d.name for d in req.deletions)]))
    controller = ctx.services.controller
    results: list[AlterUserScramCredentialsResult]
    if not authorize_cluster(ctx, AclOperation.ALTER):
        results = [AlterUserScramCredentialsResult(u, ErrorCode.cluster_authorization_failed) for u in users]
    elif controller is None or not controller.active:
        results = [AlterUserScramCredentialsResult(u, ErrorCode.not_controller) for u in users]
    else:
        results = await alter_user_scram_credentials(
            ctx.services.zk.store,
            [
                ScramCredentialUpsertion(
                    u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
                )
                for u in req.upsertions
            ],
            [ScramCredentialDeletion(d.name, int(d.mechanism)) for d in req.deletions],
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        results=tuple(
            ctx.make(
                "AlterUserScramCredentialsResult", user=r.user, error_code=r.error_code, error_message=r.error_message
            )
            for r in results
        ),
    )
