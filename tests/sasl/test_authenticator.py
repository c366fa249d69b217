"""The per-connection SASL state machine, every (state, input) pair."""

from __future__ import annotations

import attrs
import pytest

from kafkette.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request
from kafkette.server.sasl import SaslSettings, SaslState, ServerAuthenticator, Step

SETTINGS = SaslSettings.with_users(["SCRAM-SHA-256", "PLAIN"], [("alice", "secret")])
GOOD = b"\0alice\0secret"
EXPIRING = attrs.evolve(SETTINGS, connections_max_reauth_ms={"PLAIN": 2000, "SCRAM-SHA-256": 2000})
"""Sessions that expire (KIP-368): the re-authentication states are reachable."""
BAD_MECHANISM = (
    "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
    "re-authentication of mechanism 'PLAIN'"
)


def in_state(state: SaslState) -> ServerAuthenticator:
    """An authenticator driven into ``state`` with real inputs."""
    if state in (SaslState.REAUTH_HANDSHAKE, SaslState.REAUTH_BAD_MECHANISM):
        auth = ServerAuthenticator(EXPIRING)
        auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"), 0.0)
        auth.receive_request(36, 2, SaslAuthenticateRequest(auth_bytes=GOOD), 0.0)
        assert auth.check_request(17, 1500.0) is None
        if state is SaslState.REAUTH_BAD_MECHANISM:
            auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1500.0)
        assert auth.state is state
        return auth
    auth = ServerAuthenticator(SETTINGS)
    if state is SaslState.HANDSHAKE:
        auth.receive_request(18, 3, ApiVersionsRequest())
    elif state is SaslState.AUTHENTICATE:
        auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    elif state is SaslState.RAW_TOKENS:
        auth.receive_request(17, 0, SaslHandshakeRequest(mechanism="PLAIN"))
    elif state is SaslState.COMPLETE:
        auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        auth.receive_request(36, 2, SaslAuthenticateRequest(auth_bytes=GOOD))
    elif state is SaslState.FAILED:
        auth.receive_request(3, 12, MetadataRequest(topics=None))
    assert auth.state is state
    return auth


INPUTS: dict[str, tuple[int, int, Request]] = {
    "api_versions": (18, 3, ApiVersionsRequest()),
    "handshake_v1": (17, 1, SaslHandshakeRequest(mechanism="PLAIN")),
    "handshake_v0": (17, 0, SaslHandshakeRequest(mechanism="PLAIN")),
    "handshake_unknown": (17, 1, SaslHandshakeRequest(mechanism="GSSAPI")),
    "authenticate_good": (36, 2, SaslAuthenticateRequest(auth_bytes=GOOD)),
    "authenticate_bad": (36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope")),
    "metadata": (3, 12, MetadataRequest(topics=None)),
    "produce": (0, 9, ProduceRequest()),
}

ENABLED = ["SCRAM-SHA-256", "PLAIN"]
OK_HANDSHAKE = Step(response=SaslHandshakeResponse(error_code=0, mechanisms=ENABLED))
OK_AUTH = Step(response=SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=b""))
FAILED_AUTH = Step(
    response=SaslAuthenticateResponse(
        error_code=58,
        error_message="Authentication failed: Invalid username or password",
        auth_bytes=b"",
    ),
    close="PLAIN for User:alice: Authentication failed: Invalid username or password",
)
UNSUPPORTED = Step(
    response=SaslHandshakeResponse(error_code=33, mechanisms=ENABLED),
    close="unsupported SASL mechanism 'GSSAPI'",
)
TO_BROKER = Step(to_broker=True)

# (state, input) -> (step, next state); every pair not listed closes the connection
# unanswered and lands in FAILED.
TRANSITIONS: dict[tuple[SaslState, str], tuple[Step, SaslState]] = {
    (SaslState.HANDSHAKE_OR_VERSIONS, "api_versions"): (TO_BROKER, SaslState.HANDSHAKE),
    **{
        (state, "handshake_v1"): (OK_HANDSHAKE, SaslState.AUTHENTICATE)
        for state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE)
    },
    **{
        (state, "handshake_v0"): (OK_HANDSHAKE, SaslState.RAW_TOKENS)
        for state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE)
    },
    **{
        (state, "handshake_unknown"): (UNSUPPORTED, SaslState.FAILED)
        for state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE)
    },
    (SaslState.REAUTH_HANDSHAKE, "handshake_v1"): (OK_HANDSHAKE, SaslState.AUTHENTICATE),
    (SaslState.REAUTH_HANDSHAKE, "handshake_v0"): (OK_HANDSHAKE, SaslState.RAW_TOKENS),
    (SaslState.REAUTH_HANDSHAKE, "handshake_unknown"): (UNSUPPORTED, SaslState.FAILED),
    **{
        (SaslState.REAUTH_BAD_MECHANISM, name): (Step(close=BAD_MECHANISM), SaslState.FAILED)
        for name in INPUTS
    },
    (SaslState.AUTHENTICATE, "authenticate_good"): (OK_AUTH, SaslState.COMPLETE),
    (SaslState.AUTHENTICATE, "authenticate_bad"): (FAILED_AUTH, SaslState.FAILED),
    **{(SaslState.COMPLETE, name): (TO_BROKER, SaslState.COMPLETE) for name in INPUTS},
}


@pytest.mark.parametrize("state", list(SaslState), ids=lambda s: s.name)
@pytest.mark.parametrize("name", list(INPUTS))
def test_every_state_and_request(state: SaslState, name: str) -> None:
    auth = in_state(state)
    api_key, version, request = INPUTS[name]
    step = auth.receive_request(api_key, version, request)
    expected = TRANSITIONS.get((state, name))
    if expected is None:
        assert step.response is None and step.token is None and not step.to_broker
        assert step.close is not None and request.NAME[:-7] in step.close
        assert auth.state is SaslState.FAILED
        return
    assert (step, auth.state) == expected


@pytest.mark.parametrize("state", list(SaslState), ids=lambda s: s.name)
def test_raw_tokens_only_after_handshake_v0(state: SaslState) -> None:
    auth = in_state(state)
    step = auth.receive_token(GOOD)
    if state is SaslState.RAW_TOKENS:
        assert step == Step(token=b"")
        assert (auth.state, auth.principal, auth.mechanism) == (
            SaslState.COMPLETE,
            "User:alice",
            "PLAIN",
        )
    else:
        assert step == Step(close="unexpected raw SASL token")
        assert auth.state is SaslState.FAILED


def test_bad_raw_token_closes_without_answer() -> None:
    auth = in_state(SaslState.RAW_TOKENS)
    step = auth.receive_token(b"\0alice\0nope")
    assert step == Step(
        close="PLAIN for User:alice: Authentication failed: Invalid username or password"
    )
    assert (auth.state, auth.principal) == (SaslState.FAILED, None)
    assert step.close is not None and "nope" not in step.close  # never the password


def test_settings_refuse_unknown_or_no_mechanisms() -> None:
    with pytest.raises(ValueError, match="'GSSAPI' is not supported"):
        SaslSettings.with_users(["PLAIN", "GSSAPI"], [])
    with pytest.raises(ValueError, match="at least one"):
        SaslSettings.with_users([], [])
