"""SaslAuthenticate (key 36) after the SASL exchange, or on a listener without SASL.

Before authentication a SASL listener's connection hands SaslAuthenticate to
:class:`~odradek.server.sasl_authenticator.SaslServerAuthenticator`; a request that reaches this
module is answered as Kafka's ``KafkaApis.handleSaslAuthenticateRequest`` does: ILLEGAL_SASL_STATE,
"SaslAuthenticate request received after successful authentication". v0-v2.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import SaslAuthenticateRequest

API_KEY = ApiKey.SASL_AUTHENTICATE
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext[SaslAuthenticateRequest]) -> Any:
    return ctx.response(
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime=datetime.timedelta(0),
    )
