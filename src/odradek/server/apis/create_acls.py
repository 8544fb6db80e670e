"""CreateAcls (key 30): add ACL bindings to ZooKeeper's ACL store.

v1..v3 (v0 left with Kafka 4.0, KIP-896). Needs ALTER on the cluster (every result
CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an authorizer. One result per creation, in
order: INVALID_REQUEST for a binding that does not decode or that Kafka refuses (ANY/UNKNOWN
values, a principal without ``Type:``, an operation the resource type has not), else the
authorizer's write result (:meth:`odradek.metadata.authorizer.AclAuthorizer.create_acls`: the
pattern's znode rewritten conditionally, a change notice for every broker). Adding an existing
binding succeeds. Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclCreateResult
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclBinding
from odradek.server.apis.acl_support import WireAclCreation, binding_of, refusal
from odradek.server.auth_helper import AclOperation
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types import CreateAclsRequest

API_KEY = ApiKey.CREATE_ACLS
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext[CreateAclsRequest]) -> Any:
    creations: Sequence[WireAclCreation] = ctx.request.creations
    authorizer = ctx.services.authorizer
    results: list[AclCreateResult | None] = [None] * len(creations)
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None or authorizer is None:
        results = [AclCreateResult(*(refused or (ErrorCode.security_disabled, None)))] * len(creations)
    else:
        valid: list[tuple[int, AclBinding]] = []
        for index, creation in enumerate(creations):
            try:
                binding = binding_of(creation)
            except ValueError as exc:
                results[index] = AclCreateResult(ErrorCode.invalid_request, f"Failed to create ACL: {exc}")
                continue
            valid.append((index, binding))
        created = await authorizer.create_acls([b for _, b in valid])
        for (index, _), result in zip(valid, created, strict=True):
            results[index] = result
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        results=tuple(
            ctx.make("AclCreationResult", error_code=r.error_code, error_message=r.error_message)
            for r in results
            if r is not None
        ),
    )
