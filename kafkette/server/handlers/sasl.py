"""SaslHandshake (key 17) and SaslAuthenticate (key 36) once past authentication.

On a SASL listener these requests are served by the connection's
:class:`~kafkette.server.sasl.ServerAuthenticator` before anything else
reaches the broker core. The broker core only sees them on a connection
that needs no authentication (PLAINTEXT, in-process) or that has already
authenticated and may not re-authenticate now (its session does not expire, or it
began a re-authentication less than a second ago: KIP-368, served by the
authenticator): there, as in Kafka's ``KafkaApis``, the answer is
ILLEGAL_SASL_STATE. They are
registered here so that ApiVersions advertises them, which clients check
before they start SASL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkette.errors import IllegalSaslStateError
from kafkette.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.server.dispatch import RequestContext, handler

if TYPE_CHECKING:
    from kafkette.server.broker import Broker


@handler(SaslHandshakeRequest)
async def handle_sasl_handshake(
    broker: Broker, ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=[])


@handler(SaslAuthenticateRequest)
async def handle_sasl_authenticate(
    broker: Broker, ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=IllegalSaslStateError.code,
        error_message="SaslAuthenticate request received after successful authentication "
        "or on a listener without SASL",
        auth_bytes=b"",
    )
