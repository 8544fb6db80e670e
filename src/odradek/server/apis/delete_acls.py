"""DeleteAcls (key 31): remove the ACL bindings each filter matches.

v1..v3 (v0 left with Kafka 4.0, KIP-896). Needs ALTER on the cluster (every filter
CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an authorizer; a filter that does not
decode or names UNKNOWN values INVALID_REQUEST. Each filter's result lists the bindings it
removed (a binding matched by several filters is listed under the first), from
:meth:`odradek.metadata.authorizer.AclAuthorizer.delete_acls`. Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclDeleteResult
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclBindingFilter
from odradek.server.apis.acl_support import WireAclFilter, filter_of, refusal, unknown_filter_message
from odradek.server.auth_helper import AclOperation
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types import DeleteAclsRequest

API_KEY = ApiKey.DELETE_ACLS
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext[DeleteAclsRequest]) -> Any:
    filters: Sequence[WireAclFilter] = ctx.request.filters
    authorizer = ctx.services.authorizer
    results: list[AclDeleteResult | None] = [None] * len(filters)
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None or authorizer is None:
        results = [AclDeleteResult(*(refused or (ErrorCode.security_disabled, None))) for _ in filters]
    else:
        valid: list[tuple[int, AclBindingFilter]] = []
        for index, wire in enumerate(filters):
            try:
                binding_filter = filter_of(wire)
                problem = unknown_filter_message(binding_filter)
            except ValueError as exc:
                problem = str(exc)
            if problem is not None:
                results[index] = AclDeleteResult(ErrorCode.invalid_request, problem)
                continue
            valid.append((index, binding_filter))
        deleted = await authorizer.delete_acls([f for _, f in valid])
        for (index, _), result in zip(valid, deleted, strict=True):
            results[index] = result
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        filter_results=tuple(
            ctx.make(
                "DeleteAclsFilterResult",
                error_code=r.error_code,
                error_message=r.error_message,
                matching_acls=tuple(
                    ctx.make(
                        "DeleteAclsMatchingAcl",
                        error_code=d.error_code,
                        error_message=d.error_message,
                        resource_type=d.binding.pattern.resource_type,
                        resource_name=d.binding.pattern.name,
                        pattern_type=d.binding.pattern.pattern_type,
                        principal=d.binding.entry.principal,
                        host=d.binding.entry.host,
                        operation=d.binding.entry.operation,
                        permission_type=d.binding.entry.permission_type,
                    )
                    for d in r.bindings
                ),
            )
            for r in results
            if r is not None
        ),
    )
