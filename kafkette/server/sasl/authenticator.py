"""Authentication of one connection to a SASL listener, without I/O.

Theory of operation (Kafka's ``SaslServerAuthenticator``)::

    state              request                     outcome
    HANDSHAKE_OR_VERSIONS  ApiVersions             served by the broker -> HANDSHAKE
    HANDSHAKE_OR_VERSIONS
      or HANDSHAKE     SaslHandshake v1, enabled   answered -> AUTHENTICATE
                       SaslHandshake v0, enabled   answered -> RAW_TOKENS
                       SaslHandshake, not enabled  UNSUPPORTED_SASL_MECHANISM, close
    AUTHENTICATE       SaslAuthenticate            token answered; COMPLETE once the
                                                   mechanism is; a failure is answered
                                                   with SASL_AUTHENTICATION_FAILED, close
    RAW_TOKENS         a size-prefixed raw token   raw token answered (v0 clients);
                                                   a failure closes at once
    COMPLETE           anything                    the broker serves it

Anything else (another request before authentication, ApiVersions after the
handshake) closes the connection without an answer, as Kafka does. The
listener drives this with decoded requests (:meth:`receive_request`) or raw
tokens (:meth:`receive_token`) and sends what comes back.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

import attrs

from kafkette.errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kafkette.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request, Response
from kafkette.server.sasl.credentials import (
    MECHANISMS,
    PLAIN,
    SCRAM_ALGORITHMS,
    CredentialStore,
)
from kafkette.server.sasl.mechanism import AuthenticationFailed, ServerMechanism
from kafkette.server.sasl.plain import PlainServer
from kafkette.server.sasl.scram import ScramServer

API_VERSIONS_KEY = 18


class SaslState(enum.Enum):
    """Where one connection is in its authentication."""

    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw tokens"
    COMPLETE = "complete"
    FAILED = "failed"


@attrs.define(slots=True)
class SaslSettings:
    """What a SASL listener offers: its enabled mechanisms (in order) and its users."""

    mechanisms: Sequence[str]
    store: CredentialStore
    failed_authentication_delay_ms: int = 100
    """How long a connection stays open after a failed authentication is answered
    (Kafka's ``connection.failed.authentication.delay.ms``): it slows down password
    guessing, and lets clients read the answer before they see the connection close."""
    max_receive_size: int = 524_288
    """The largest frame accepted before authentication completes (Kafka's
    ``sasl.server.max.receive.size``); a larger one closes the connection."""

    def __attrs_post_init__(self) -> None:
        if not self.mechanisms:
            raise ValueError("at least one SASL mechanism must be enabled")
        for name in self.mechanisms:
            if name not in MECHANISMS:
                raise ValueError(
                    f"SASL mechanism {name!r} is not supported (supported: {', '.join(MECHANISMS)})"
                )

    @classmethod
    def with_users(
        cls, mechanisms: Iterable[str], users: Iterable[tuple[str, str]]
    ) -> SaslSettings:
        """Settings whose store holds ``(name, password)`` users for every enabled mechanism."""
        enabled = list(dict.fromkeys(mechanisms))
        settings = cls(enabled, CredentialStore())  # validates the names first
        for name, password in users:
            settings.store.add_user(name, password, mechanisms=enabled)
        return settings

    def new_mechanism(self, name: str) -> ServerMechanism:
        if name == PLAIN:
            return PlainServer(self.store)
        return ScramServer(SCRAM_ALGORITHMS[name], self.store)


@attrs.frozen(slots=True)
class Step:
    """What the listener does with one request or token.

    ``to_broker``: serve the request as usual. Otherwise send ``response`` (a
    Kafka response) or ``token`` (a raw token, size-prefixed) when given,
    then close the connection if ``close`` names a reason.
    """

    to_broker: bool = False
    response: Response | None = None
    token: bytes | None = None
    close: str | None = None


class ServerAuthenticator:
    """The SASL state of one connection."""

    def __init__(
        self,
        settings: SaslSettings,
        *,
        new_mechanism: Callable[[str], ServerMechanism] | None = None,
    ) -> None:
        self.settings = settings
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self._new_mechanism = new_mechanism or settings.new_mechanism
        self._mechanism: ServerMechanism | None = None

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def expects_raw_token(self) -> bool:
        """Whether the next frame is a bare SASL token (after SaslHandshake v0)."""
        return self.state is SaslState.RAW_TOKENS

    @property
    def principal(self) -> str | None:
        """``User:NAME`` once authenticated."""
        if self._mechanism is None or not self.complete:
            return None
        return f"User:{self._mechanism.principal}"

    @property
    def mechanism(self) -> str | None:
        return None if self._mechanism is None else self._mechanism.name

    def receive_request(self, api_key: int, version: int, request: Request) -> Step:
        """The next step for a Kafka request received before authentication completed."""
        state = self.state
        if state is SaslState.COMPLETE:
            return Step(to_broker=True)
        if api_key == API_VERSIONS_KEY and state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE
            return Step(to_broker=True)
        if isinstance(request, SaslHandshakeRequest) and state in (
            SaslState.HANDSHAKE_OR_VERSIONS,
            SaslState.HANDSHAKE,
        ):
            return self._handshake(request, version)
        if isinstance(request, SaslAuthenticateRequest) and state is SaslState.AUTHENTICATE:
            return self._authenticate(request)
        self.state = SaslState.FAILED
        return Step(
            close=f"unexpected {type(request).NAME[:-7]} request during SASL authentication "
            f"(state: {state.value})"
        )

    def receive_token(self, token: bytes) -> Step:
        """The next step for a raw token (SaslHandshake v0 clients)."""
        if self.state is not SaslState.RAW_TOKENS or self._mechanism is None:
            self.state = SaslState.FAILED
            return Step(close="unexpected raw SASL token")
        try:
            answer = self._mechanism.evaluate(token)
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            return Step(close=self._failure(exc))
        if self._mechanism.complete:
            self.state = SaslState.COMPLETE
        return Step(token=answer)

    def _failure(self, exc: AuthenticationFailed) -> str:
        """Why the connection closes, for the log: the mechanism and the user the client
        claimed to be (never what it sent as a password)."""
        assert self._mechanism is not None
        claimed = self._mechanism.claimed_user
        who = f" for User:{claimed}" if claimed else ""
        return f"{self._mechanism.name}{who}: {exc}"

    def _handshake(self, request: SaslHandshakeRequest, version: int) -> Step:
        enabled = list(self.settings.mechanisms)
        if request.mechanism not in enabled:
            self.state = SaslState.FAILED
            return Step(
                response=SaslHandshakeResponse(
                    error_code=UnsupportedSaslMechanismError.code, mechanisms=enabled
                ),
                close=f"unsupported SASL mechanism {request.mechanism!r}",
            )
        self._mechanism = self._new_mechanism(request.mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKENS
        return Step(response=SaslHandshakeResponse(error_code=0, mechanisms=enabled))

    def _authenticate(self, request: SaslAuthenticateRequest) -> Step:
        assert self._mechanism is not None
        try:
            answer = self._mechanism.evaluate(request.auth_bytes)
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            return Step(
                response=SaslAuthenticateResponse(
                    error_code=SaslAuthenticationFailedError.code,
                    error_message=str(exc),
                    auth_bytes=b"",
                ),
                close=self._failure(exc),
            )
        if self._mechanism.complete:
            self.state = SaslState.COMPLETE
        return Step(
            response=SaslAuthenticateResponse(
                error_code=0, error_message=None, auth_bytes=answer, session_lifetime_ms=0
            )
        )
