"""KIP-368 on the broker, without sockets: session lifetimes, expiry, re-authentication
rules (Kafka's SaslServerAuthenticator, KafkaChannel and SocketServer), and where
``connections.max.reauth.ms`` is read from."""

from __future__ import annotations

import argparse

import attrs
import pytest

from kafkette.cli.serve import add_arguments, build_config, build_listeners, build_nodes, build_sasl
from kafkette.client.security.sasl import ScramClient
from kafkette.errors import ConfigError
from kafkette.protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
)
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.config.catalog import BROKER_CONFIGS
from kafkette.server.sasl import SaslSettings, SaslState, ServerAuthenticator
from kafkette.server.sasl.reauth import (
    ReauthSettingError,
    is_listener_reauth_property,
    reauth_ms_by_mechanism,
)

USERS = [("alice", "secret"), ("bob", "hunter2")]
BASE = SaslSettings.with_users(["PLAIN", "SCRAM-SHA-512"], USERS)
EXPIRING = attrs.evolve(BASE, connections_max_reauth_ms={"PLAIN": 2000, "SCRAM-SHA-512": 3000})


def plain(user: str = "alice", password: str = "secret") -> bytes:
    return f"\0{user}\0{password}".encode()


def login(
    auth: ServerAuthenticator, now_ms: float, token: bytes | None = None
) -> SaslAuthenticateResponse:
    """PLAIN handshake and token (v1 / v2); returns the SaslAuthenticate answer."""
    step = auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"), now_ms)
    assert step.response is not None and step.response.error_code == 0, step
    step = auth.receive_request(36, 2, SaslAuthenticateRequest(auth_bytes=token or plain()), now_ms)
    assert isinstance(step.response, SaslAuthenticateResponse)
    return step.response


def test_without_the_setting_sessions_do_not_expire() -> None:
    auth = ServerAuthenticator(BASE)
    assert login(auth, 0.0).session_lifetime_ms == 0
    assert auth.session_expires_ms is None
    # A SaslHandshake later goes to the broker core (ILLEGAL_SASL_STATE there).
    assert auth.check_request(17, 10**9) is None
    assert auth.complete
    assert auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).to_broker


def test_the_lifetime_is_answered_and_the_session_expires_after_it() -> None:
    auth = ServerAuthenticator(EXPIRING)
    answer = login(auth, 1000.0)
    assert (answer.error_code, answer.session_lifetime_ms) == (0, 2000)
    assert auth.session_expires_ms == 3000.0
    for api_key in (3, 0, 1, 36):
        assert auth.check_request(api_key, 3000.0) is None  # not after the expiry yet
    close = auth.check_request(3, 3001.0)
    assert close is not None and "expired" in close and "2000 ms" in close


def test_scram_gets_its_own_lifetime_and_reauthenticates() -> None:
    auth = ServerAuthenticator(EXPIRING)

    def exchange(now_ms: float) -> list[SaslAuthenticateResponse]:
        client = ScramClient("SCRAM-SHA-512", "alice", "secret")
        step = auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), now_ms)
        assert step.response is not None and step.response.error_code == 0
        answers = []
        token: bytes | None = client.initial()
        while token is not None:
            step = auth.receive_request(36, 2, SaslAuthenticateRequest(auth_bytes=token), now_ms)
            assert isinstance(step.response, SaslAuthenticateResponse), step
            answers.append(step.response)
            token = client.respond(step.response.auth_bytes)
        return answers

    first = exchange(0.0)
    assert [a.session_lifetime_ms for a in first] == [0, 3000]  # only the last one
    assert auth.check_request(17, 2500.0) is None
    again = exchange(2500.0)
    assert [a.session_lifetime_ms for a in again] == [0, 3000]
    assert (auth.complete, auth.principal, auth.reauthentications) == (True, "User:alice", 1)
    assert auth.session_expires_ms == 5500.0


def test_reauthentication_is_allowed_after_expiry_but_not_twice_a_second() -> None:
    auth = ServerAuthenticator(EXPIRING)
    login(auth, 0.0)
    assert auth.check_request(17, 5000.0) is None  # expired, but a SaslHandshake begins it
    assert auth.state is SaslState.REAUTH_HANDSHAKE
    assert login(auth, 5000.0).session_lifetime_ms == 2000
    assert auth.reauthentications == 1
    # Within a second of the last start: served by the broker as usual.
    assert auth.check_request(17, 5999.0) is None
    assert auth.complete
    assert auth.check_request(17, 6000.0) is None
    assert auth.state is SaslState.REAUTH_HANDSHAKE


def test_expired_sessions_close_even_a_handshake_within_the_second() -> None:
    auth = ServerAuthenticator(attrs.evolve(BASE, connections_max_reauth_ms={"PLAIN": 100}))
    login(auth, 0.0)
    assert auth.check_request(17, 50.0) is None
    login(auth, 50.0)
    close = auth.check_request(17, 500.0)  # 450 ms after the last start, session over
    assert close is not None and "expired" in close


def test_another_principal_is_refused() -> None:
    auth = ServerAuthenticator(EXPIRING)
    login(auth, 0.0)
    auth.check_request(17, 1800.0)
    answer = login(auth, 1800.0, plain("bob", "hunter2"))
    message = "Cannot change principals during re-authentication from User.alice: User.bob"
    assert (answer.error_code, answer.error_message) == (58, message)
    assert auth.failed
    assert auth.principal is None


def test_another_mechanism_is_answered_then_refused_at_the_next_token() -> None:
    auth = ServerAuthenticator(EXPIRING)
    login(auth, 0.0)
    auth.check_request(17, 1800.0)
    step = auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1800.0)
    assert step.response is not None and step.response.error_code == 0 and step.close is None
    step = auth.receive_request(36, 2, SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=x"))
    assert step.response is None and step.close == (
        "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )
    assert auth.failed


def test_a_wrong_password_at_reauthentication_fails() -> None:
    auth = ServerAuthenticator(EXPIRING)
    login(auth, 0.0)
    auth.check_request(17, 1800.0)
    answer = login(auth, 1800.0, plain("alice", "nope"))
    assert answer.error_code == 58
    assert auth.failed


def test_other_requests_during_reauthentication_close() -> None:
    auth = ServerAuthenticator(EXPIRING)
    login(auth, 0.0)
    auth.check_request(17, 1800.0)
    auth.receive_request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"), 1800.0)
    step = auth.receive_request(3, 12, MetadataRequest(topics=None), 1800.0)
    assert step.close is not None and "Metadata" in step.close
    assert auth.failed


def test_raw_token_clients_get_an_expiry_too() -> None:
    auth = ServerAuthenticator(EXPIRING)
    auth.receive_request(17, 0, SaslHandshakeRequest(mechanism="PLAIN"), 0.0)
    assert auth.receive_token(plain(), 0.0).token == b""
    assert auth.session_expires_ms == 2000.0
    assert auth.check_request(3, 2001.0) is not None


def test_where_the_setting_is_read_from() -> None:
    properties = {
        "listener.name.external.connections.max.reauth.ms": "5000",
        "listener.name.external.plain.connections.max.reauth.ms": "1000",
        "listener.name.internal.scram-sha-512.connections.max.reauth.ms": "-1",
    }
    mechanisms = ["PLAIN", "SCRAM-SHA-512"]
    assert reauth_ms_by_mechanism(properties, "EXTERNAL", mechanisms, 60_000) == {
        "PLAIN": 1000,
        "SCRAM-SHA-512": 5000,
    }
    assert reauth_ms_by_mechanism(properties, "INTERNAL", mechanisms, 60_000) == {
        "PLAIN": 60_000,
        "SCRAM-SHA-512": -1,
    }
    assert reauth_ms_by_mechanism({}, "SASL_SSL", mechanisms, 0) == {
        "PLAIN": 0,
        "SCRAM-SHA-512": 0,
    }
    assert (
        attrs.evolve(BASE, connections_max_reauth_ms={"PLAIN": -1}).session_lifetime_ms("PLAIN")
        == 0
    )
    for name in properties:
        assert is_listener_reauth_property(name)
    assert not is_listener_reauth_property("connections.max.reauth.ms")
    assert not is_listener_reauth_property("listener.name.x.sasl.jaas.config")
    with pytest.raises(ReauthSettingError, match="must be an integer") as caught:
        reauth_ms_by_mechanism(
            {"listener.name.a.plain.connections.max.reauth.ms": "soon"}, "A", ["PLAIN"], 0
        )
    assert caught.value.name == "listener.name.a.plain.connections.max.reauth.ms"


def test_the_broker_setting_is_known() -> None:
    assert BrokerConfig().connections_max_reauth_ms == 0
    assert BROKER_CONFIGS["connections.max.reauth.ms"].default == "0"
    config = BrokerConfig.from_properties({"connections.max.reauth.ms": "2000"})
    assert config.connections_max_reauth_ms == 2000
    with pytest.raises(ConfigError, match=r"connections\.max\.reauth\.ms.*integer"):
        BrokerConfig.from_properties({"connections.max.reauth.ms": "2s"})


def serve_listeners(*argv: str) -> dict[str, dict[str, int] | None]:
    """What ``kafkette serve ARGV`` gives each listener: its settings by mechanism."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(argv)
    config = build_config(args)
    built = build_listeners(args, config, build_sasl(args, config), build_nodes(args))
    return {
        s.listener.name: None if s.sasl is None else dict(s.sasl.connections_max_reauth_ms)
        for s in built
    }


def test_serve_reads_the_broker_listener_and_mechanism_names() -> None:
    listeners = serve_listeners(
        "--listener",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--listener",
        "INTERNAL://127.0.0.1:0",
        "--listener",
        "PLAINTEXT://127.0.0.1:0",
        "--set",
        "listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "PLAINTEXT:PLAINTEXT",
        "--sasl-user",
        "alice:secret",
        "--sasl-mechanisms",
        "PLAIN,SCRAM-SHA-256",
        "--set",
        "connections.max.reauth.ms=60000",
        "--set",
        "listener.name.internal.connections.max.reauth.ms=0",
        "--set",
        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms=5000",
    )
    assert listeners == {
        "SASL_PLAINTEXT": {"PLAIN": 60000, "SCRAM-SHA-256": 5000},
        "INTERNAL": {"PLAIN": 0, "SCRAM-SHA-256": 0},
        "PLAINTEXT": None,
    }
    assert serve_listeners("--listen", "127.0.0.1:0", "--sasl-user", "a:b") == {
        "SASL_PLAINTEXT": {"PLAIN": 0, "SCRAM-SHA-256": 0, "SCRAM-SHA-512": 0}
    }
    with pytest.raises(ConfigError) as info:
        serve_listeners(
            "--listen",
            "127.0.0.1:0",
            "--sasl-user",
            "a:b",
            "--set",
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms=soon",
        )
    assert "listener.name.sasl_plaintext.plain.connections.max.reauth.ms" in str(info.value)
