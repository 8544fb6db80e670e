"""SaslHandshake (key 17) after the SASL exchange, or on a listener without SASL.

Before authentication a SASL listener's connection hands SaslHandshake to
:class:`~odradek.server.sasl_authenticator.SaslServerAuthenticator`; a request that reaches this
module is answered as Kafka's ``KafkaApis.handleSaslHandshakeRequest`` does: ILLEGAL_SASL_STATE
and no mechanisms (a PLAINTEXT or SSL listener, or an authenticated connection that is not
re-authenticating). v0-v1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import SaslHandshakeRequest

API_KEY = ApiKey.SASL_HANDSHAKE
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[SaslHandshakeRequest]) -> Any:
    return ctx.response(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
