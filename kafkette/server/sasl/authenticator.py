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

Re-authentication (KIP-368, Kafka's ``KafkaChannel`` and ``ReauthInfo``): when the
listener's ``connections.max.reauth.ms`` for the mechanism is positive, a
successful SaslAuthenticate answers it as ``session_lifetime_ms`` and the session
expires that long after. The listener asks :meth:`check_request` about every
request of an authenticated connection whose session expires::

    request on a COMPLETE connection         outcome
    SaslHandshake, none started within 1 s   re-authentication: REAUTH_HANDSHAKE, the
                                             frame goes to receive_request (even after
                                             the session expired)
    anything else, session expired           the connection closes unanswered
    anything else                            the broker serves it (a SaslHandshake too:
                                             ILLEGAL_SASL_STATE)

    state              request                     outcome
    REAUTH_HANDSHAKE   SaslHandshake, the same     answered -> AUTHENTICATE, then as above;
                       mechanism                   a different principal at the end is
                                                   SASL_AUTHENTICATION_FAILED, close
                       SaslHandshake, another      answered -> REAUTH_BAD_MECHANISM
                       enabled mechanism
    REAUTH_BAD_MECHANISM  anything                 close unanswered (Kafka's message logged)

Requests the client sent before its SaslHandshake are answered before it, since
the listener serves a connection's requests in order.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence

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
SASL_HANDSHAKE_KEY = 17
MIN_REAUTH_INTERVAL_MS = 1000.0
"""A connection may start a re-authentication at most once a second (Kafka's
``KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``): a SaslHandshake sooner is served
by the broker as on a connection without re-authentication."""


class SaslState(enum.Enum):
    """Where one connection is in its authentication."""

    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw tokens"
    COMPLETE = "complete"
    FAILED = "failed"
    REAUTH_HANDSHAKE = "re-authentication handshake"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"


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
    connections_max_reauth_ms: Mapping[str, int] = attrs.field(factory=dict)
    """Kafka's ``connections.max.reauth.ms`` by mechanism, for this listener
    (:func:`~kafkette.server.sasl.reauth.reauth_ms_by_mechanism`): a positive value is
    the session lifetime told to clients, after which a connection that has not
    re-authenticated is closed at its next request. Absent or not positive: sessions
    do not expire."""

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

    def session_lifetime_ms(self, mechanism: str) -> int:
        """How long a session authenticated with ``mechanism`` lasts (0: for ever)."""
        return max(self.connections_max_reauth_ms.get(mechanism, 0), 0)

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
        self.session_expires_ms: float | None = None
        """When the session expires (the clock of ``now_ms``), None if it does not."""
        self.session_lifetime_ms = 0
        """The lifetime given at the last (re-)authentication (0: none)."""
        self.reauthentications = 0
        """Re-authentications completed on this connection."""
        self._reauth_started_ms: float | None = None
        self._previous: tuple[str, str] | None = None  # mechanism and principal, re-authenticating
        self._bad_mechanism = ""

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
    def reauthenticating(self) -> bool:
        """Whether the authentication under way is a re-authentication (KIP-368)."""
        return self._previous is not None

    @property
    def principal(self) -> str | None:
        """``User:NAME`` once authenticated."""
        if self._mechanism is None or not self.complete:
            return None
        return f"User:{self._mechanism.principal}"

    def check_request(self, api_key: int, now_ms: float) -> str | None:
        """For a request on an authenticated connection: None to go on, or why the
        connection closes (its session expired). A SaslHandshake may begin a
        re-authentication instead: :attr:`complete` is then False and the request goes
        to :meth:`receive_request`. Only needed while :attr:`session_expires_ms` is set."""
        expires = self.session_expires_ms
        if expires is None or self.state is not SaslState.COMPLETE:
            return None
        if api_key == SASL_HANDSHAKE_KEY and (
            self._reauth_started_ms is None
            or now_ms - self._reauth_started_ms >= MIN_REAUTH_INTERVAL_MS
        ):
            assert self._mechanism is not None and self.principal is not None
            self._previous = (self._mechanism.name, self.principal)
            self._reauth_started_ms = now_ms
            self.state = SaslState.REAUTH_HANDSHAKE
            return None
        if now_ms > expires:
            return (
                f"its SASL session expired {now_ms - expires:.0f} ms ago without "
                f"re-authentication (session lifetime {self.session_lifetime_ms} ms, "
                "connections.max.reauth.ms)"
            )
        return None

    @property
    def mechanism(self) -> str | None:
        return None if self._mechanism is None else self._mechanism.name

    def receive_request(
        self, api_key: int, version: int, request: Request, now_ms: float = 0.0
    ) -> Step:
        """The next step for a Kafka request received before authentication completed
        (or during a re-authentication); ``now_ms`` dates the session's start."""
        state = self.state
        if state is SaslState.COMPLETE:
            return Step(to_broker=True)
        if api_key == API_VERSIONS_KEY and state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE
            return Step(to_broker=True)
        if isinstance(request, SaslHandshakeRequest) and state in (
            SaslState.HANDSHAKE_OR_VERSIONS,
            SaslState.HANDSHAKE,
            SaslState.REAUTH_HANDSHAKE,
        ):
            return self._handshake(request, version)
        if isinstance(request, SaslAuthenticateRequest) and state is SaslState.AUTHENTICATE:
            return self._authenticate(request, now_ms)
        if state is SaslState.REAUTH_BAD_MECHANISM:
            self.state = SaslState.FAILED
            return Step(close=self._bad_mechanism)
        self.state = SaslState.FAILED
        return Step(
            close=f"unexpected {type(request).NAME[:-7]} request during SASL authentication "
            f"(state: {state.value})"
        )

    def receive_token(self, token: bytes, now_ms: float = 0.0) -> Step:
        """The next step for a raw token (SaslHandshake v0 clients)."""
        if self.state is not SaslState.RAW_TOKENS or self._mechanism is None:
            self.state = SaslState.FAILED
            return Step(close="unexpected raw SASL token")
        try:
            answer = self._mechanism.evaluate(token)
            if self._mechanism.complete:
                self._complete(now_ms)
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            return Step(close=self._failure(exc))
        return Step(token=answer)

    def _complete(self, now_ms: float) -> int:
        """The exchange succeeded: the session starts (raises :class:`AuthenticationFailed`
        for a re-authentication as someone else); returns its lifetime (0: for ever)."""
        assert self._mechanism is not None
        previous = self._previous
        principal = f"User:{self._mechanism.principal}"
        if previous is not None and previous[1] != principal:
            # Kafka's ReauthInfo.ensurePrincipalUnchanged (KafkaPrincipal: TYPE.NAME)
            raise AuthenticationFailed(
                "Cannot change principals during re-authentication from "
                f"{previous[1].replace(':', '.', 1)}: {principal.replace(':', '.', 1)}"
            )
        lifetime = self.settings.session_lifetime_ms(self._mechanism.name)
        self.session_lifetime_ms = lifetime
        self.session_expires_ms = now_ms + lifetime if lifetime > 0 else None
        if previous is not None:
            self.reauthentications += 1
            self._previous = None
        self.state = SaslState.COMPLETE
        return lifetime

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
        answer = Step(response=SaslHandshakeResponse(error_code=0, mechanisms=enabled))
        previous = self._previous
        if previous is not None and request.mechanism != previous[0]:
            # Kafka answers the handshake, and fails at the next token (REAUTH_BAD_MECHANISM).
            self._bad_mechanism = (
                f"SASL mechanism '{request.mechanism}' requested by client is not supported "
                f"for re-authentication of mechanism '{previous[0]}'"
            )
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return answer
        self._mechanism = self._new_mechanism(request.mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKENS
        return answer

    def _authenticate(self, request: SaslAuthenticateRequest, now_ms: float) -> Step:
        assert self._mechanism is not None
        lifetime = 0
        try:
            answer = self._mechanism.evaluate(request.auth_bytes)
            if self._mechanism.complete:
                lifetime = self._complete(now_ms)
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
        return Step(
            response=SaslAuthenticateResponse(
                error_code=0, error_message=None, auth_bytes=answer, session_lifetime_ms=lifetime
            )
        )
