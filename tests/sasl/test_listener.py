"""A SASL_PLAINTEXT listener in process, over a real loopback socket (asyncio and trio)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.client.security.sasl import SaslCredentials, ScramClient
from kafkette.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request, Response
from kafkette.server import Broker
from kafkette.server.net.listener import serve_tcp
from kafkette.server.sasl import SaslSettings

pytestmark = pytest.mark.anyio

SETTINGS = SaslSettings.with_users(["PLAIN", "SCRAM-SHA-512"], [("alice", "secret")])
CLOSED = (anyio.EndOfStream, anyio.BrokenResourceError)


class RawClient:
    """Kafka frames over a stream, one request at a time, and nothing else."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.correlation_id = 0

    async def send(self, request: Request, version: int) -> None:
        self.correlation_id += 1
        body = bytes(encode_request(request, version, self.correlation_id, "raw"))
        await self.stream.send(struct.pack(">i", len(body)) + body)

    async def frame(self) -> bytes:
        while (
            len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">i", self.buffer[:4])[0]
        ):
            self.buffer += await self.stream.receive()
        size = struct.unpack(">i", self.buffer[:4])[0]
        frame, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
        return frame

    async def request(self, request: Request, version: int) -> Response:
        await self.send(request, version)
        correlation_id, response = decode_response(await self.frame(), request.API_KEY, version)
        assert correlation_id == self.correlation_id
        return response

    async def assert_closed(self) -> None:
        with anyio.fail_after(5), pytest.raises(CLOSED):
            await self.frame()


class Server:
    """A listener's port, and the raw clients connected to it (closed at the end)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.clients: list[RawClient] = []

    async def connect(self) -> RawClient:
        client = RawClient(await anyio.connect_tcp("127.0.0.1", self.port))
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.stream.aclose()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda **kw: serve_tcp(Broker(), "127.0.0.1", 0, sasl=SETTINGS, **kw))
        running = Server(port)
        yield running
        await running.aclose()
        tg.cancel_scope.cancel()


async def test_only_api_versions_and_handshake_before_authentication(server: Server) -> None:
    """Metadata before authenticating closes the connection unanswered, as Kafka does."""
    client = await server.connect()
    await client.send(MetadataRequest(topics=None), 12)
    await client.assert_closed()

    client = await server.connect()
    versions = await client.request(ApiVersionsRequest(), 3)
    assert isinstance(versions, ApiVersionsResponse)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert (ranges[17], ranges[36]) == ((0, 1), (0, 2))
    await client.send(ApiVersionsRequest(), 3)  # a second ApiVersions is not expected
    await client.assert_closed()

    client = await server.connect()
    handshake = await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake == SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN", "SCRAM-SHA-512"])
    await client.send(MetadataRequest(topics=None), 12)  # handshake done, not authenticated
    await client.assert_closed()


async def test_unsupported_mechanism_lists_the_enabled_ones(server: Server) -> None:
    client = await server.connect()
    response = await client.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert response == SaslHandshakeResponse(error_code=33, mechanisms=["PLAIN", "SCRAM-SHA-512"])
    await client.assert_closed()


@pytest.mark.parametrize(
    ("mechanism", "token", "message"),
    [
        ("PLAIN", b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", b"\0bob\0secret", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-512",
            b"p=tls-unique,,n=alice,r=abc",
            "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
async def test_failed_authentication_is_answered_then_closed(
    server: Server, mechanism: str, token: bytes, message: str
) -> None:
    client = await server.connect()
    await client.request(SaslHandshakeRequest(mechanism=mechanism), 1)
    response = await client.request(SaslAuthenticateRequest(auth_bytes=token), 2)
    assert response == SaslAuthenticateResponse(
        error_code=58, error_message=message, auth_bytes=b"", session_lifetime_ms=0
    )
    await client.assert_closed()


async def test_scram_then_requests_are_served(server: Server) -> None:
    """After SCRAM the connection is an ordinary one; SASL requests get ILLEGAL_SASL_STATE."""
    client = await server.connect()
    await client.request(ApiVersionsRequest(), 3)
    await client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
    scram = ScramClient("SCRAM-SHA-512", "alice", "secret")
    first = await client.request(SaslAuthenticateRequest(auth_bytes=scram.initial()), 1)
    assert isinstance(first, SaslAuthenticateResponse) and first.error_code == 0
    final_token = scram.respond(first.auth_bytes)
    assert final_token is not None
    final = await client.request(SaslAuthenticateRequest(auth_bytes=final_token), 1)
    assert isinstance(final, SaslAuthenticateResponse)
    assert (final.error_code, final.session_lifetime_ms) == (0, 0)
    assert scram.respond(final.auth_bytes) is None  # the broker's signature verified
    metadata = await client.request(MetadataRequest(topics=None), 12)
    assert isinstance(metadata, MetadataResponse) and metadata.brokers[0].node_id == 1
    again = await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert again == SaslHandshakeResponse(error_code=34, mechanisms=[])


async def test_handshake_v0_then_raw_tokens(server: Server) -> None:
    """SaslHandshake v0: the PLAIN token and its (empty) answer travel size-prefixed, unframed."""
    client = await server.connect()
    response = await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    assert isinstance(response, SaslHandshakeResponse) and response.error_code == 0
    token = b"\0alice\0secret"
    await client.stream.send(struct.pack(">i", len(token)) + token)
    assert await client.frame() == b""
    metadata = await client.request(MetadataRequest(topics=None), 12)
    assert isinstance(metadata, MetadataResponse) and len(metadata.brokers) == 1

    client = await server.connect()
    await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    token = b"\0alice\0wrong"
    await client.stream.send(struct.pack(">i", len(token)) + token)
    await client.assert_closed()  # v0 has no way to carry an error: the connection closes


async def test_plaintext_listener_answers_sasl_with_illegal_state() -> None:
    """As Kafka's request handler does; our client then reports ILLEGAL_SASL_STATE."""
    async with anyio.create_task_group() as tg:
        server = Server(await tg.start(serve_tcp, Broker(), "127.0.0.1", 0))
        client = await server.connect()
        response = await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert response == SaslHandshakeResponse(error_code=34, mechanisms=[])
        auth = await client.request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), 2)
        assert isinstance(auth, SaslAuthenticateResponse) and auth.error_code == 34
        credentials = SaslCredentials("PLAIN", "alice", "secret")
        with pytest.raises(IllegalSaslStateError) as info:
            await BrokerConnection.connect("127.0.0.1", server.port, sasl=credentials)
        assert info.value.detail == (
            f"127.0.0.1:{server.port} refused SaslHandshake: is it a SASL listener?"
        )
        await server.aclose()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_broker_connection_authenticates(server: Server, mechanism: str) -> None:
    """Our client connection authenticates, or raises the broker's error and message."""
    good = SaslCredentials(mechanism, "alice", "secret")
    async with await BrokerConnection.connect("127.0.0.1", server.port, sasl=good) as connection:
        metadata = await connection.request(MetadataRequest(topics=None))
        assert isinstance(metadata, MetadataResponse) and len(metadata.brokers) == 1
    bad = SaslCredentials(mechanism, "alice", "wrong")
    with pytest.raises(SaslAuthenticationFailedError) as info:
        await BrokerConnection.connect("127.0.0.1", server.port, sasl=bad)
    assert info.value.detail is not None and "Authentication failed" in info.value.detail
    assert not info.value.retriable


async def test_broker_connection_reports_the_offered_mechanisms(server: Server) -> None:
    credentials = SaslCredentials("SCRAM-SHA-256", "alice", "secret")
    with pytest.raises(UnsupportedSaslMechanismError) as info:
        await BrokerConnection.connect("127.0.0.1", server.port, sasl=credentials)
    assert info.value.detail == (
        f"127.0.0.1:{server.port} does not enable SASL mechanism SCRAM-SHA-256 "
        "(it offers: PLAIN, SCRAM-SHA-512)"
    )
