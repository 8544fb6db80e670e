"""The ACL APIs on fakes of their services and a real AclAuthorizer over an in-memory store."""

from __future__ import annotations

import asyncio

from kio.schema.create_acls.v3 import request as create_v3
from kio.schema.describe_acls.v3 import request as describe_v3

from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.embedded import EmbeddedStore
from odradek.security.acl import SUPER_USERS_CONFIG, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.apis import create_acls, describe_acls

from .api_fakes import FakeServices, call, context

ADMIN = KafkaPrincipal("User", "admin")


def _creation(resource_type: int) -> create_v3.AclCreation:
    return create_v3.AclCreation(
        resource_type=resource_type,
        resource_name="t",
        resource_pattern_type=int(PatternType.LITERAL),
        principal="User:alice",
        host="*",
        operation=int(AclOperation.READ),
        permission_type=int(AclPermissionType.ALLOW),
    )


DESCRIBE_ALL = describe_v3.DescribeAclsRequest(
    resource_type_filter=int(ResourceType.ANY),
    resource_name_filter=None,
    pattern_type_filter=int(PatternType.ANY),
    principal_filter=None,
    host_filter=None,
    operation=int(AclOperation.ANY),
    permission_type=int(AclPermissionType.ANY),
)


def test_acl_apis_without_an_authorizer_answer_security_disabled() -> None:
    services = FakeServices()
    created = call(create_acls, services, 3, create_v3.CreateAclsRequest(creations=(_creation(2),)))
    assert [r.error_code for r in created.results] == [ErrorCode.security_disabled]
    described = call(describe_acls, services, 3, DESCRIBE_ALL)
    assert (described.error_code, described.resources) == (ErrorCode.security_disabled, ())


def test_create_acls_stores_valid_bindings_that_describe_acls_then_lists() -> None:
    async def main() -> None:
        authorizer = AclAuthorizer(EmbeddedStore().session(), {SUPER_USERS_CONFIG: "User:admin"})
        await authorizer.start()
        services = FakeServices(authorizer=authorizer)
        request = create_v3.CreateAclsRequest(creations=(_creation(int(ResourceType.TOPIC)), _creation(99)))
        created = await create_acls.handle(context(services, create_acls.API_KEY, 3, request, ADMIN))
        assert [r.error_code for r in created.results] == [ErrorCode.none, ErrorCode.invalid_request]
        described = await describe_acls.handle(context(services, describe_acls.API_KEY, 3, DESCRIBE_ALL, ADMIN))
        assert described.error_code == ErrorCode.none
        (resource,) = described.resources
        assert (resource.resource_type, resource.resource_name) == (ResourceType.TOPIC, "t")
        assert [(a.principal, a.operation) for a in resource.acls] == [("User:alice", AclOperation.READ)]
        refused = await describe_acls.handle(context(services, describe_acls.API_KEY, 3, DESCRIBE_ALL, ANONYMOUS))
        assert (refused.error_code, refused.resources) == (ErrorCode.cluster_authorization_failed, ())

    asyncio.run(main())
