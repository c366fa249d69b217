"""SASL for client connections: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, 7677).

A mechanism is a small state machine without I/O: :meth:`initial` gives the
first token, :meth:`respond` answers each token from the broker and returns
None once the exchange is over. :func:`authenticate` drives one over a
connection the Kafka way (KIP-152): SaslHandshake v1 names the mechanism,
then each token travels in a SaslAuthenticate request. A broker's refusal
raises its error class: :class:`~kafkette.errors.UnsupportedSaslMechanismError`
(with the mechanisms it offers) or
:class:`~kafkette.errors.SaslAuthenticationFailedError` (with its message);
neither is retriable.

Re-authentication (KIP-368): the last SaslAuthenticate answer of an exchange
carries the session's lifetime (``session_lifetime_ms``, the broker's
``connections.max.reauth.ms``; 0: the session does not expire), which
:func:`authenticate` returns. :class:`ReauthSchedule` says when to authenticate
again on the same connection: as Kafka's ``SaslClientAuthenticator``, at a random
point between 85% and 95% of the lifetime, so that many connections do not all
re-authenticate at once and the exchange ends before the broker would close the
connection. The connection (:mod:`kafkette.client.connection`) runs it between
requests.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs

from kafkette.client.config import ClientConfig
from kafkette.errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    make_error,
)
from kafkette.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request, Response

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
"""Fewer SCRAM iterations than Kafka's minimum are refused (a downgrade)."""


@attrs.frozen(slots=True, repr=False)
class SaslCredentials:
    """What a client authenticates with."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"SaslCredentials(mechanism={self.mechanism!r}, username={self.username!r})"


class ClientMechanism(Protocol):
    """One SASL exchange on the client side, without I/O."""

    name: str

    def initial(self) -> bytes:
        """The first token the client sends."""

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to the broker's token, or None when the exchange is complete.

        Raises :class:`SaslAuthenticationFailedError` when the broker's token
        is wrong (e.g. a SCRAM server signature that does not verify).
        """


class PlainClient:
    """PLAIN: ``NUL username NUL password`` in one token."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()

    def initial(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        return None


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def client_nonce() -> str:
    """A fresh client nonce: printable, no comma."""
    return secrets.token_urlsafe(24)


class ScramClient:
    """SCRAM-SHA-256 or SCRAM-SHA-512, without channel binding (GS2 header ``n,,``)."""

    GS2_HEADER = "n,,"

    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        self.name = mechanism
        self._hash = SCRAM_HASHES.get(mechanism) or _scram_hash(mechanism)
        self._password = password
        self._nonce = nonce if nonce is not None else client_nonce()
        self._client_first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._step = 0

    def initial(self) -> bytes:
        self._step = 1
        return (self.GS2_HEADER + self._client_first_bare).encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        if self._step == 1:
            self._step = 2
            return self._client_final(challenge).encode("utf-8")
        if self._step == 2:
            self._step = 3
            self._verify_server_final(challenge)
            return None
        raise SaslAuthenticationFailedError(f"{self.name}: unexpected token after the exchange")

    def _fail(self, reason: str) -> SaslAuthenticationFailedError:
        return SaslAuthenticationFailedError(f"{self.name}: {reason}")

    def _client_final(self, challenge: bytes) -> str:
        try:
            server_first = challenge.decode("utf-8")
            attributes = dict(item.split("=", 1) for item in server_first.split(","))
            nonce = attributes["r"]
            salt = base64.b64decode(attributes["s"], validate=True)
            iterations = int(attributes["i"])
        except (UnicodeDecodeError, ValueError, KeyError, binascii.Error):
            raise self._fail(f"malformed server-first message {challenge!r}") from None
        if "m" in attributes:
            raise self._fail("the broker requires a SCRAM extension this client does not know")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._fail("the broker's nonce does not extend ours")
        if iterations < MIN_ITERATIONS:
            raise self._fail(f"{iterations} iterations is below the minimum {MIN_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode("utf-8"), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        channel_binding = base64.b64encode(self.GS2_HEADER.encode("ascii")).decode("ascii")
        without_proof = f"c={channel_binding},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}"

    def _verify_server_final(self, challenge: bytes) -> None:
        text = challenge.decode("utf-8", "replace")
        if text.startswith("e="):
            raise self._fail(f"the broker refused the proof: {text[2:]}")
        try:
            signature = base64.b64decode(text.removeprefix("v="), validate=True)
        except binascii.Error:
            signature = b""
        expected = self._server_signature
        if not text.startswith("v=") or expected is None:
            raise self._fail(f"malformed server-final message {text!r}")
        if not hmac.compare_digest(signature, expected):
            raise self._fail(
                "the broker's signature does not verify: it does not know the password"
            )

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()


def _scram_hash(mechanism: str) -> str:
    # Only for tests against RFC 5802's SCRAM-SHA-1 vector; Kafka has no SCRAM-SHA-1.
    if mechanism == "SCRAM-SHA-1":
        return "sha1"
    raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")


def client_mechanism(credentials: SaslCredentials) -> ClientMechanism:
    """A fresh mechanism for one connection."""
    if credentials.mechanism == "PLAIN":
        return PlainClient(credentials.username, credentials.password)
    return ScramClient(credentials.mechanism, credentials.username, credentials.password)


Send = Callable[[Request, int], Awaitable[Response | None]]


REAUTH_WINDOW = (0.85, 0.95)
"""Where in the session's lifetime a client re-authenticates (Kafka's client: 85%
for network latency and clock drift, plus up to 10% of jitter)."""


class ReauthSchedule:
    """When a connection re-authenticates, without I/O or a clock of its own."""

    def __init__(self, rng: Callable[[], float] = random.random) -> None:
        self._rng = rng
        self.due_ms: float | None = None
        """When to re-authenticate (the clock of :meth:`started`), None: never."""
        self.lifetime_ms = 0

    def started(self, now_ms: float, lifetime_ms: int) -> None:
        """A session of ``lifetime_ms`` (0: without expiry) began at ``now_ms``."""
        self.lifetime_ms = lifetime_ms
        if lifetime_ms <= 0:
            self.due_ms = None
            return
        low, high = REAUTH_WINDOW
        self.due_ms = now_ms + lifetime_ms * (low + (high - low) * self._rng())

    def due(self, now_ms: float) -> bool:
        due = self.due_ms
        return due is not None and now_ms >= due


async def authenticate(
    send: Send,
    versions: dict[int, tuple[int, int]],
    credentials: SaslCredentials,
    address: str,
) -> int:
    """Authenticate a connection whose API versions are ``versions``; returns the
    session's lifetime in ms (0: it does not expire).

    ``send(request, version)`` sends a request and returns its response.
    """
    handshake = versions.get(SaslHandshakeRequest.API_KEY)
    auth = versions.get(SaslAuthenticateRequest.API_KEY)
    if handshake is None or handshake[1] < 1 or auth is None:
        raise UnsupportedVersionError(
            f"{address} does not support SaslHandshake v1 and SaslAuthenticate "
            "(a broker older than Kafka 1.0, or not a SASL listener)"
        )
    mechanism = client_mechanism(credentials)
    response = await send(SaslHandshakeRequest(mechanism=mechanism.name), 1)
    assert isinstance(response, SaslHandshakeResponse)
    if response.error_code == UnsupportedSaslMechanismError.code:
        offered = ", ".join(response.mechanisms) or "none"
        raise UnsupportedSaslMechanismError(
            f"{address} does not enable SASL mechanism {mechanism.name} (it offers: {offered})"
        )
    if response.error_code != 0:
        raise make_error(
            response.error_code, f"{address} refused SaslHandshake: is it a SASL listener?"
        )
    auth_version = min(auth[1], SaslAuthenticateRequest.VALID_VERSIONS[1])
    token: bytes | None = mechanism.initial()
    lifetime_ms = 0
    while token is not None:
        answer = await send(SaslAuthenticateRequest(auth_bytes=token), auth_version)
        assert isinstance(answer, SaslAuthenticateResponse)
        if answer.error_code != 0:
            reason = answer.error_message or "refused"
            if answer.error_code == SaslAuthenticationFailedError.code:
                reason = (
                    f"{reason}: are sasl.username and sasl.password right for "
                    f"sasl.mechanism={mechanism.name}?"
                )
            raise make_error(answer.error_code, f"{address}: {reason}")
        lifetime_ms = answer.session_lifetime_ms
        token = mechanism.respond(answer.auth_bytes)
    return lifetime_ms


def sasl_credentials_for(config: ClientConfig) -> SaslCredentials | None:
    """The credentials of a client's connections, or None without SASL.

    In-process clusters (``memory://``, ``file://``) are reached without SASL.
    """
    if not config.security_protocol.startswith("sasl"):
        return None
    if config.bootstrap_servers[0].startswith(("memory://", "file://")):
        return None
    assert config.sasl_username is not None and config.sasl_password is not None  # checked
    return SaslCredentials(config.sasl_mechanism, config.sasl_username, config.sasl_password)
