"""SASL SCRAM on the server (RFC 5802, RFC 7677): SCRAM-SHA-256 and SCRAM-SHA-512.

Theory of operation::

    client-first   n,[a=AUTHZID],n=USER,r=CNONCE[,ext...]
    server-first   r=CNONCE SNONCE,s=BASE64(SALT),i=ITERATIONS
    client-final   c=BASE64(GS2 HEADER),r=CNONCE SNONCE,p=BASE64(PROOF)
    server-final   v=BASE64(SERVER SIGNATURE)

The proof is checked against the user's ``StoredKey``: ``ClientKey = PROOF
XOR HMAC(StoredKey, AuthMessage)`` must hash to ``StoredKey``. An unknown
user gets a fake salt (stable per name) and fails at the proof, so the
exchange does not reveal which users exist. Every failure gives the client
Kafka's one message for SCRAM, naming no detail.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable

from kafkette.server.sasl.credentials import CredentialStore, ScramAlgorithm, ScramCredential
from kafkette.server.sasl.mechanism import AuthenticationFailed


def new_nonce() -> str:
    """A fresh server nonce: printable, no comma."""
    return secrets.token_urlsafe(24)


def decode_saslname(text: str) -> str:
    """A user name as SCRAM writes it: ``=2C`` is a comma, ``=3D`` an equals sign."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "=":
            escape = text[i : i + 3]
            if escape == "=2C":
                out.append(",")
            elif escape == "=3D":
                out.append("=")
            else:
                raise ValueError(f"invalid escape in user name {text!r}")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_attributes(text: str) -> list[tuple[str, str]]:
    """``k=v,k=v`` into pairs (values may contain ``=``, never ``,``)."""
    pairs = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed SCRAM attribute {item!r}")
        pairs.append((key, value))
    return pairs


class ScramServer:
    """One SCRAM exchange for one connection."""

    def __init__(
        self,
        algorithm: ScramAlgorithm,
        store: CredentialStore,
        *,
        nonce: Callable[[], str] = new_nonce,
    ) -> None:
        self.name = algorithm.mechanism
        self._algorithm = algorithm
        self._store = store
        self._new_nonce = nonce
        self._step = 0
        self._principal: str | None = None
        self._user = ""
        self._known_user = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    @property
    def failure_message(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {self.name}"
        )

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def claimed_user(self) -> str | None:
        return self._user or None

    def evaluate(self, token: bytes) -> bytes:
        """Answer the client-first message, then the client-final one."""
        try:
            text = token.decode("utf-8")
            if self._step == 0:
                return self._client_first(text).encode("utf-8")
            if self._step == 1:
                return self._client_final(text).encode("utf-8")
        except (ValueError, UnicodeDecodeError, binascii.Error):
            pass
        self._step = -1
        raise AuthenticationFailed(self.failure_message)

    def _client_first(self, text: str) -> str:
        flag, sep, rest = text.partition(",")
        authzid_attr, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise ValueError("bad GS2 header (channel binding is not supported)")
        fields = bare.split(",")
        attributes = parse_attributes(",".join(fields[:2]))
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ValueError("client-first message must start with n= and r=")
        user = decode_saslname(attributes[0][1])
        client_nonce = attributes[1][1]
        if not user or not client_nonce:
            raise ValueError("empty user name or nonce")
        # Kafka's extensions (KIP-84/KIP-342): only tokenauth means something, and
        # delegation tokens are not served here.
        if "tokenauth=true" in (f.lower() for f in fields[2:]):
            raise ValueError("delegation tokens are not supported")
        if authzid_attr and (
            not authzid_attr.startswith("a=") or decode_saslname(authzid_attr[2:]) != user
        ):
            raise ValueError("authorization id differs from the user name")
        credential = self._store.scram_credential(self.name, user)
        self._known_user = credential is not None
        if credential is None:
            credential = self._store.fake_scram_credential(self._algorithm, user)
        self._user = user
        self._credential = credential
        self._gs2_header = f"{flag},{authzid_attr},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._new_nonce()
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._step = 1
        return self._server_first

    def _client_final(self, text: str) -> str:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ValueError("client-final message has no proof")
        attributes = dict(parse_attributes(without_proof))
        binding = base64.b64decode(attributes.get("c", ""), validate=True)
        if binding != self._gs2_header.encode("utf-8"):
            raise ValueError("channel binding does not match the GS2 header")
        # RFC 5802 wants r to be exactly our nonce; librdkafka sends its own nonce
        # followed by ours, and Kafka accepts any r that ends with it: so do we.
        if not attributes.get("r", "").endswith(self._nonce):
            raise ValueError("nonce does not match")
        proof = base64.b64decode(proof_attr, validate=True)
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        algorithm = self._algorithm
        client_signature = algorithm.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ValueError("proof has the wrong size")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(algorithm.h(client_key), credential.stored_key):
            raise ValueError("invalid proof")
        if not self._known_user:
            raise ValueError("unknown user")
        server_signature = algorithm.hmac(credential.server_key, auth_message)
        self._principal = self._user
        self._step = 2
        return "v=" + base64.b64encode(server_signature).decode("ascii")
