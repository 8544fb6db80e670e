"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user has, and their
iteration counts (never the salt or keys).

v0. Needs DESCRIBE on the cluster (top-level CLUSTER_AUTHORIZATION_FAILED). ``users`` null or
empty describes every user with a credential in ``/config/users``; otherwise one result per user
asked: RESOURCE_NOT_FOUND for a user without credentials or an empty name, DUPLICATE_RESOURCE
for a name asked twice (:func:`odradek.metadata.scram_credentials.describe_user_scram_credentials`).
Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.metadata.scram_credentials import describe_user_scram_credentials
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, AclOperation, authorize_cluster
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import DescribeUserScramCredentialsRequest

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[DescribeUserScramCredentialsRequest]) -> Any:
    throttle = datetime.timedelta(0)
    users = ctx.request.users
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        denied = ErrorCode.cluster_authorization_failed
        return ctx.response(  # as Kafka's getErrorResponse: the error again for each user asked
            throttle_time=throttle,
            error_code=denied,
            error_message=CLUSTER_AUTHORIZATION_MESSAGE,
            results=tuple(
                ctx.make(
                    "DescribeUserScramCredentialsResult",
                    user=u.name,
                    error_code=denied,
                    error_message=CLUSTER_AUTHORIZATION_MESSAGE,
                    credential_infos=(),
                )
                for u in users or ()
            ),
        )
    store = ctx.services.zk.store
    answer = await describe_user_scram_credentials(store, None if users is None else [u.name for u in users])
    return ctx.response(
        throttle_time=throttle,
        error_code=answer.error_code,
        error_message=answer.error_message,
        results=tuple(
            ctx.make(
                "DescribeUserScramCredentialsResult",
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
                credential_infos=tuple(
                    ctx.make("CredentialInfo", mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in r.credential_infos
                ),
            )
            for r in answer.results
        ),
    )
