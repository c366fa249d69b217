"""Salted credentials for SASL users: no password is kept once a user is added.

SCRAM (RFC 5802) stores, per user and hash function, a random salt, an
iteration count and two keys derived from the password: ``StoredKey``
(checks the client's proof) and ``ServerKey`` (signs the server's final
message). The same derivation serves PLAIN: the password a client sends is
salted and hashed with the user's SCRAM-SHA-256 parameters and compared with
the ``StoredKey``, so PLAIN needs no clear-text copy either.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

import attrs

MIN_ITERATIONS = 4096
"""Kafka's minimum (and default) SCRAM iteration count."""
SALT_SIZE = 16


@attrs.frozen(slots=True)
class ScramAlgorithm:
    """A SCRAM mechanism: its SASL name and the hash function it is built on."""

    mechanism: str
    hash_name: str

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def h(self, data: bytes) -> bytes:
        """``H()`` of RFC 5802."""
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        """``HMAC()`` of RFC 5802."""
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """``Hi(Normalize(password), salt, i)``: PBKDF2 with this hash.

        SASLprep normalisation is reduced to UTF-8 encoding, as Kafka's Java
        client and librdkafka do.
        """
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramAlgorithm("SCRAM-SHA-256", "sha256")
SCRAM_SHA_512 = ScramAlgorithm("SCRAM-SHA-512", "sha512")
SCRAM_ALGORITHMS = {a.mechanism: a for a in (SCRAM_SHA_256, SCRAM_SHA_512)}

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *SCRAM_ALGORITHMS)
"""Every mechanism this broker can serve."""


@attrs.frozen(slots=True, repr=False)
class ScramCredential:
    """What the server keeps of one user's password for one SCRAM hash."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def make_scram_credential(
    algorithm: ScramAlgorithm,
    password: str,
    *,
    salt: bytes | None = None,
    iterations: int = MIN_ITERATIONS,
) -> ScramCredential:
    """Derive a credential from ``password`` (a random salt unless one is given)."""
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"SCRAM needs at least {MIN_ITERATIONS} iterations, got {iterations}")
    salt = secrets.token_bytes(SALT_SIZE) if salt is None else salt
    salted = algorithm.salted_password(password, salt, iterations)
    client_key = algorithm.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=algorithm.h(client_key),
        server_key=algorithm.hmac(salted, b"Server Key"),
    )


class CredentialStore:
    """Users and their salted credentials, for every SCRAM hash and for PLAIN."""

    def __init__(self) -> None:
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        # A stable fake salt per unknown user, so that SCRAM does not reveal who exists.
        self._fake_salt_key = secrets.token_bytes(32)

    def add_user(
        self,
        name: str,
        password: str,
        *,
        mechanisms: Iterable[str] = MECHANISMS,
        iterations: int = MIN_ITERATIONS,
    ) -> None:
        """Add (or replace) ``name``; only salted keys are kept, never ``password``."""
        if not name:
            raise ValueError("a SASL user name must not be empty")
        wanted = set(mechanisms)
        unknown = wanted - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unknown SASL mechanism {sorted(unknown)[0]!r}")
        algorithms = {a for m, a in SCRAM_ALGORITHMS.items() if m in wanted}
        if PLAIN in wanted:
            algorithms.add(SCRAM_SHA_256)  # PLAIN checks against the SHA-256 keys
        for key in [k for k in self._scram if k[1] == name]:
            del self._scram[key]
        for algorithm in algorithms:
            self._scram[(algorithm.mechanism, name)] = make_scram_credential(
                algorithm, password, iterations=iterations
            )

    def add_scram_credential(self, mechanism: str, name: str, credential: ScramCredential) -> None:
        """Add a credential derived elsewhere (e.g. with a known salt, for tests)."""
        if mechanism not in SCRAM_ALGORITHMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        self._scram[(mechanism, name)] = credential

    def remove_scram_credential(self, mechanism: str, name: str) -> bool:
        """Remove one credential; whether there was one."""
        return self._scram.pop((mechanism, name), None) is not None

    @property
    def users(self) -> list[str]:
        """The names of every user, sorted."""
        return sorted({name for _, name in self._scram})

    def scram_credential(self, mechanism: str, name: str) -> ScramCredential | None:
        """The credential of ``name`` for a SCRAM mechanism, None for an unknown user."""
        return self._scram.get((mechanism, name))

    def fake_scram_credential(self, algorithm: ScramAlgorithm, name: str) -> ScramCredential:
        """A credential no password matches, with a salt stable per ``name``."""
        salt = hmac.new(self._fake_salt_key, name.encode("utf-8"), "sha256").digest()[:SALT_SIZE]
        size = algorithm.digest_size
        return ScramCredential(salt, MIN_ITERATIONS, bytes(size), bytes(size))

    def check_plain(self, name: str, password: str) -> bool:
        """Whether ``password`` is that of ``name`` (in constant time for a known user)."""
        credential = self._scram.get((SCRAM_SHA_256.mechanism, name))
        known = credential is not None
        if credential is None:
            credential = self.fake_scram_credential(SCRAM_SHA_256, name)
        salted = SCRAM_SHA_256.salted_password(password, credential.salt, credential.iterations)
        stored_key = SCRAM_SHA_256.h(SCRAM_SHA_256.hmac(salted, b"Client Key"))
        return hmac.compare_digest(stored_key, credential.stored_key) and known
