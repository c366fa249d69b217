"""SASL mechanisms without I/O: RFC test vectors, client against server, failures."""

from __future__ import annotations

import base64
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.client.security.sasl import PlainClient, ScramClient
from kafkette.errors import SaslAuthenticationFailedError
from kafkette.server.sasl import (
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    AuthenticationFailed,
    CredentialStore,
    PlainServer,
    ScramAlgorithm,
    ScramCredential,
    ScramServer,
    make_scram_credential,
)

SCRAM_SHA_1 = ScramAlgorithm("SCRAM-SHA-1", "sha1")


class Vector(NamedTuple):
    """One RFC exchange for user "user" with password "pencil"."""

    client_nonce: str
    server_nonce: str
    salt: str
    client_first: bytes
    server_first: bytes
    client_final: bytes
    server_final: bytes


# RFC 7677 section 3 (SCRAM-SHA-256)
RFC7677 = Vector(
    client_nonce="rOprNGfwEbeRWgbNEkqO",
    server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    salt="W22ZaJ0SNY7soEsUEjb6gQ==",
    client_first=b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    server_first=b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    client_final=b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    server_final=b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)
# RFC 5802 section 5 (SCRAM-SHA-1)
RFC5802 = Vector(
    client_nonce="fyko+d2lbbFgONRv9qkxdawL",
    server_nonce="3rfcNHYJY1ZVvWVs7j",
    salt="QSXCR+Q6sek8bf92",
    client_first=b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    server_first=b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    client_final=b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
    b"p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    server_final=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
)
VECTORS = [(SCRAM_SHA_256, RFC7677), (SCRAM_SHA_1, RFC5802)]
IDS = ["rfc7677-sha256", "rfc5802-sha1"]


class VectorStore(CredentialStore):
    """A store holding "user" for any SCRAM hash (the real one knows only Kafka's two)."""

    def __init__(self, credential: ScramCredential) -> None:
        super().__init__()
        self._credential = credential

    def scram_credential(self, mechanism: str, name: str) -> ScramCredential | None:
        return self._credential if name == "user" else None


def vector_server(algorithm: ScramAlgorithm, vector: Vector) -> ScramServer:
    credential = make_scram_credential(
        algorithm, "pencil", salt=base64.b64decode(vector.salt), iterations=4096
    )
    return ScramServer(algorithm, VectorStore(credential), nonce=lambda: vector.server_nonce)


@pytest.mark.parametrize(("algorithm", "vector"), VECTORS, ids=IDS)
def test_client_reproduces_rfc_vector(algorithm: ScramAlgorithm, vector: Vector) -> None:
    """The client sends the RFC's exact messages and accepts its server signature."""
    client = ScramClient(algorithm.mechanism, "user", "pencil", nonce=vector.client_nonce)
    assert client.initial() == vector.client_first
    assert client.respond(vector.server_first) == vector.client_final
    assert client.respond(vector.server_final) is None


@pytest.mark.parametrize(("algorithm", "vector"), VECTORS, ids=IDS)
def test_server_reproduces_rfc_vector(algorithm: ScramAlgorithm, vector: Vector) -> None:
    """The server answers the RFC's client messages with the RFC's exact messages."""
    server = vector_server(algorithm, vector)
    assert server.evaluate(vector.client_first) == vector.server_first
    assert not server.complete
    assert server.evaluate(vector.client_final) == vector.server_final
    assert (server.complete, server.principal) == (True, "user")


def test_rfc7677_stored_keys() -> None:
    """The salted credential holds the keys RFC 7677's exchange implies, not the password."""
    credential = make_scram_credential(
        SCRAM_SHA_256, "pencil", salt=base64.b64decode(RFC7677.salt), iterations=4096
    )
    salted = SCRAM_SHA_256.salted_password("pencil", credential.salt, 4096)
    assert credential.stored_key == SCRAM_SHA_256.h(SCRAM_SHA_256.hmac(salted, b"Client Key"))
    assert credential.server_key == SCRAM_SHA_256.hmac(salted, b"Server Key")
    assert "pencil" not in repr(credential)
    with pytest.raises(ValueError, match="4096"):
        make_scram_credential(SCRAM_SHA_256, "pencil", iterations=4095)


def test_server_refuses_a_wrong_proof_and_tampering() -> None:
    """A wrong proof, a changed nonce or channel binding fail with Kafka's message."""
    tampered = [
        RFC7677.client_final.replace(b"p=dH", b"p=eH"),
        RFC7677.client_final.replace(b"r=rOpr", b"r=xOpr"),
        RFC7677.client_final.replace(b"c=biws", b"c=eSws"),
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        b"\xff\xfe",
    ]
    for client_final in tampered:
        server = vector_server(SCRAM_SHA_256, RFC7677)
        server.evaluate(RFC7677.client_first)
        with pytest.raises(AuthenticationFailed) as info:
            server.evaluate(client_final)
        assert str(info.value) == (
            "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-256"
        )
        assert not server.complete
        with pytest.raises(AuthenticationFailed):  # a failed exchange stays failed
            server.evaluate(RFC7677.client_final)


@pytest.mark.parametrize(
    "client_first",
    [
        b"p=tls-unique,,n=user,r=abc",  # channel binding
        b"n,a=other,n=user,r=abc",  # authzid differs from the user
        b"n,,r=abc,n=user",  # attributes out of order
        b"n,,n=user,r=abc,tokenauth=true",  # delegation token
        b"n,,n=us=3Xer,r=abc",  # bad escape
        b"n,,n=user,r=",
        b"",
    ],
)
def test_server_refuses_bad_client_first(client_first: bytes) -> None:
    server = vector_server(SCRAM_SHA_256, RFC7677)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(client_first)


def client_final(
    algorithm: ScramAlgorithm,
    password: str,
    client_first: str,
    server_first: str,
    *,
    nonce: str | None = None,
) -> bytes:
    """A client-final message computed from RFC 5802's formulas, naming any nonce."""
    gs2, bare = (
        client_first[: client_first.index(",n=") + 1],
        client_first[client_first.index(",n=") + 1 :],
    )
    attributes = dict(item.split("=", 1) for item in server_first.split(","))
    salted = algorithm.salted_password(
        password, base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    client_key = algorithm.hmac(salted, b"Client Key")
    channel = base64.b64encode(gs2.encode()).decode()
    without_proof = f"c={channel},r={nonce or attributes['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = algorithm.hmac(algorithm.h(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_server_accepts_authzid_equal_to_user() -> None:
    """``a=user`` names the user itself: accepted, and bound in the channel binding."""
    store = CredentialStore()
    store.add_user("user", "pencil", mechanisms=["SCRAM-SHA-256"])
    server = ScramServer(SCRAM_SHA_256, store, nonce=lambda: "SERVER")
    first = "n,a=user,n=user,r=CLIENT"
    server_first = server.evaluate(first.encode()).decode()
    assert server_first.startswith("r=CLIENTSERVER,s=")
    assert server.evaluate(client_final(SCRAM_SHA_256, "pencil", first, server_first))
    assert server.principal == "user"


def test_server_accepts_librdkafka_nonce() -> None:
    """librdkafka's final nonce is its own followed by the server's: Kafka accepts it, so do we."""
    store = CredentialStore()
    store.add_user("user", "pencil", mechanisms=["SCRAM-SHA-256"])
    server = ScramServer(SCRAM_SHA_256, store, nonce=lambda: "SERVER")
    first = "n,,n=user,r=CLIENT"
    server_first = server.evaluate(first.encode()).decode()
    final = client_final(SCRAM_SHA_256, "pencil", first, server_first, nonce="CLIENTCLIENTSERVER")
    assert server.evaluate(final).startswith(b"v=")
    assert server.principal == "user"
    server = ScramServer(SCRAM_SHA_256, store, nonce=lambda: "SERVER")
    server_first = server.evaluate(first.encode()).decode()
    with pytest.raises(AuthenticationFailed):  # but not a nonce that drops part of ours
        server.evaluate(client_final(SCRAM_SHA_256, "pencil", first, server_first, nonce="ERVER"))


def test_unknown_user_is_indistinguishable_until_the_proof() -> None:
    """An unknown user gets a salt (stable per name) and fails only at the proof."""
    store = CredentialStore()
    store.add_user("alice", "secret", mechanisms=["SCRAM-SHA-512"])
    salts = []
    for _ in range(2):
        server = ScramServer(SCRAM_SHA_512, store)
        client = ScramClient("SCRAM-SHA-512", "mallory", "secret")
        server_first = server.evaluate(client.initial())
        salts.append(server_first.split(b",s=")[1].split(b",")[0])
        final = client.respond(server_first)
        assert final is not None
        with pytest.raises(AuthenticationFailed, match="invalid credentials"):
            server.evaluate(final)
    assert salts[0] == salts[1]
    assert len(base64.b64decode(salts[0])) == 16


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_refuses_a_server_that_does_not_know_the_password(mechanism: str) -> None:
    """A forged server signature, a short iteration count or a foreign nonce fail the client."""
    store = CredentialStore()
    store.add_user("alice", "secret")
    algorithm = SCRAM_SHA_256 if mechanism == "SCRAM-SHA-256" else SCRAM_SHA_512
    server = ScramServer(algorithm, store)
    client = ScramClient(mechanism, "alice", "secret")
    final = client.respond(server.evaluate(client.initial()))
    assert final is not None
    server.evaluate(final)
    with pytest.raises(SaslAuthenticationFailedError, match="does not verify"):
        client.respond(b"v=" + base64.b64encode(bytes(algorithm.digest_size)))
    client = ScramClient(mechanism, "alice", "secret", nonce="abc")
    client.initial()
    with pytest.raises(SaslAuthenticationFailedError, match="minimum 4096"):
        client.respond(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4095")
    client = ScramClient(mechanism, "alice", "secret", nonce="abc")
    client.initial()
    with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
        client.respond(b"r=xyzdef,s=QSXCR+Q6sek8bf92,i=4096")
    client = ScramClient(mechanism, "alice", "secret", nonce="abc")
    client.initial()
    client.respond(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096")
    with pytest.raises(SaslAuthenticationFailedError, match="refused the proof: invalid-proof"):
        client.respond(b"e=invalid-proof")


names = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\0"), min_size=1, max_size=12
)


@settings(max_examples=15, deadline=None)
@given(
    user=names,
    password=names,
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    right=st.booleans(),
)
def test_scram_client_and_server_agree(
    user: str, password: str, mechanism: str, right: bool
) -> None:
    """Any user and password (commas, equals signs, any script) authenticate; a wrong one fails."""
    store = CredentialStore()
    store.add_user(user, password, mechanisms=[mechanism])
    algorithm = SCRAM_SHA_256 if mechanism == "SCRAM-SHA-256" else SCRAM_SHA_512
    server = ScramServer(algorithm, store)
    client = ScramClient(mechanism, user, password if right else password + "x")
    final = client.respond(server.evaluate(client.initial()))
    assert final is not None
    if not right:
        with pytest.raises(AuthenticationFailed):
            server.evaluate(final)
        return
    server_final = server.evaluate(final)
    assert client.respond(server_final) is None
    assert (server.complete, server.principal) == (True, user)


@settings(max_examples=15, deadline=None)
@given(user=names, password=names, right=st.booleans())
def test_plain_client_and_server_agree(user: str, password: str, right: bool) -> None:
    store = CredentialStore()
    store.add_user(user, password, mechanisms=["PLAIN"])
    server = PlainServer(store)
    token = PlainClient(user, password if right else password + "x").initial()
    assert token == f"\0{user}\0{password if right else password + 'x'}".encode()
    if right:
        assert server.evaluate(token) == b""
        assert server.principal == user
    else:
        with pytest.raises(
            AuthenticationFailed, match=r"^Authentication failed: Invalid username or password$"
        ):
            server.evaluate(token)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0alice\0secret", None),  # authzid equal to the user is accepted
        (b"bob\0alice\0secret", "authorization id that is different from username"),
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0nobody\0secret", "Invalid username or password"),
        (b"\0\0secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"\0alice", "authzid NUL username NUL password"),
        (b"\0alice\0sec\0ret", "authzid NUL username NUL password"),
        (b"\0alice\0\xff", "not UTF-8"),
    ],
)
def test_plain_server(token: bytes, message: str | None) -> None:
    store = CredentialStore()
    store.add_user("alice", "secret", mechanisms=["PLAIN"])
    server = PlainServer(store)
    if message is None:
        assert server.evaluate(token) == b""
        assert server.principal == "alice"
        return
    with pytest.raises(AuthenticationFailed, match=message):
        server.evaluate(token)
    assert not server.complete


def test_store_keeps_no_password() -> None:
    """Only salts and derived keys are stored, per enabled mechanism."""
    store = CredentialStore()
    store.add_user("alice", "correct horse", mechanisms=["PLAIN", "SCRAM-SHA-512"])
    kept = [store.scram_credential(m, "alice") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]
    assert all(c is not None and c.iterations == MIN_ITERATIONS for c in kept)
    fields = [getattr(c, f) for c in kept for f in ("salt", "stored_key", "server_key")]
    assert not any(b"correct horse" in f for f in fields)
    assert kept[0] is not None and kept[1] is not None and kept[0].salt != kept[1].salt
    assert store.users == ["alice"]
    assert store.check_plain("alice", "correct horse")
    assert not store.check_plain("alice", "correct horsE")
    store.add_user("alice", "new", mechanisms=["SCRAM-SHA-256"])  # replaced, not merged
    assert store.scram_credential("SCRAM-SHA-512", "alice") is None
    with pytest.raises(ValueError, match="GSSAPI"):
        store.add_user("bob", "x", mechanisms=["GSSAPI"])


@settings(max_examples=60, deadline=None)
@given(first=st.binary(max_size=80), final=st.binary(max_size=200))
def test_server_mechanisms_fail_cleanly_on_any_bytes(first: bytes, final: bytes) -> None:
    """Whatever a client sends, the server answers or fails with AuthenticationFailed."""
    store = CredentialStore()
    store.add_scram_credential(
        "SCRAM-SHA-256",
        "user",
        make_scram_credential(SCRAM_SHA_256, "pencil", salt=b"0123456789abcdef"),
    )
    for server in (ScramServer(SCRAM_SHA_256, store), PlainServer(store)):
        try:
            server.evaluate(first)
            server.evaluate(final)
        except AuthenticationFailed:
            pass
        assert not server.complete
