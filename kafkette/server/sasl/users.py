"""SCRAM users managed over the protocol: DescribeUserScramCredentials and
AlterUserScramCredentials, as Kafka's controller applies them.

:class:`ScramUsers` applies the requests to a broker's
:class:`~kafkette.server.sasl.CredentialStore` (the store its SASL listeners
authenticate against, so a user added is served at once) and, for a broker with
a data directory, keeps every SCRAM credential in
``<data dir>/kafkette-scram-credentials.json``: salts and derived keys only, as
the client sent them (a salted password, never a password). At start the file's
credentials are loaded over those of ``--sasl-user``/``--sasl-users-file``, so
a password changed over the protocol survives a restart; a file user deleted
over the protocol comes back at the next start, since the file says so.

The rules are Kafka's: a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512
(2) is UNSUPPORTED_SASL_MECHANISM; an empty name, an empty salt or salted
password, or an iteration count outside 4096..16384 is UNACCEPTABLE_CREDENTIAL;
one (user, mechanism) twice in one request is DUPLICATE_RESOURCE; deleting a
credential that does not exist is RESOURCE_NOT_FOUND. A user with any error has
none of its alterations applied; the others' are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from kafkette.backends.disk.checkpoint import write_atomically
from kafkette.errors import (
    ApiError,
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from kafkette.server.sasl.credentials import (
    MIN_ITERATIONS,
    SCRAM_ALGORITHMS,
    CredentialStore,
    ScramCredential,
)

MAX_ITERATIONS = 16384
"""Kafka's largest SCRAM iteration count."""

MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""The protocol's ScramMechanism numbers."""
MECHANISM_NAMES = {number: name for name, number in MECHANISM_IDS.items()}

CREDENTIALS_FILE = "kafkette-scram-credentials.json"


@attrs.frozen
class Upsertion:
    """Set one user's credential for one mechanism from a salted password."""

    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = attrs.field(repr=False)


@attrs.frozen
class Deletion:
    """Remove one user's credential for one mechanism."""

    user: str
    mechanism: int


@attrs.frozen
class UserResult:
    """One user's outcome: error None when every alteration of the user applied."""

    user: str
    error: ApiError | None = None
    mechanisms: tuple[tuple[int, int], ...] = ()
    """For a description: (mechanism number, iterations) of each credential."""


class CredentialsFileError(ValueError):
    """The data directory's SCRAM credentials file cannot be read."""


class ScramUsers:
    """The SCRAM users of one broker: described, altered, persisted."""

    def __init__(
        self,
        store: CredentialStore,
        data_dir: str | None = None,
        *,
        keep: Callable[[str], object] | None = None,
    ) -> None:
        """``keep`` takes the credentials file's new content after a change (a served
        broker writes it in a worker thread); without it the file is written at once."""
        self.store = store
        self.path = os.path.join(data_dir, CREDENTIALS_FILE) if data_dir else None
        self._keep = keep
        if self.path is not None:
            self._load(self.path)

    # ---- describe

    def describe(self, names: Sequence[str] | None) -> list[UserResult]:
        """Each named user's mechanisms and iterations (every user for None or [])."""
        if not names:
            return [self._describe_one(name) for name in self.store.users]
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        results = []
        for name in dict.fromkeys(names):
            if counts[name] > 1:
                results.append(
                    UserResult(
                        name,
                        DuplicateResourceError(
                            f"Cannot describe SCRAM credentials for the same user twice in a "
                            f"single request: {name}"
                        ),
                    )
                )
            elif name not in self.store.users:
                results.append(
                    UserResult(
                        name,
                        ResourceNotFoundError(
                            f"Attempt to describe a user credential that does not exist: {name}"
                        ),
                    )
                )
            else:
                results.append(self._describe_one(name))
        return results

    def _describe_one(self, name: str) -> UserResult:
        infos = []
        for mechanism, number in MECHANISM_IDS.items():
            credential = self.store.scram_credential(mechanism, name)
            if credential is not None:
                infos.append((number, credential.iterations))
        return UserResult(name, None, tuple(infos))

    # ---- alter

    def alter(
        self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]
    ) -> list[UserResult]:
        """Apply the alterations user by user; one result per user, in request order."""
        changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
        counts: dict[tuple[str, int], int] = {}
        for change in changes:
            key = (change.user, change.mechanism)
            counts[key] = counts.get(key, 0) + 1
        errors: dict[str, ApiError] = {}
        for change in changes:
            if change.user not in errors:
                error = self._check(change, counts[(change.user, change.mechanism)] > 1)
                if error is not None:
                    errors[change.user] = error
        results = []
        applied = False
        for user in dict.fromkeys(change.user for change in changes):
            error = errors.get(user)
            if error is None:
                for change in changes:
                    if change.user == user:
                        self._apply(change)
                        applied = True
            results.append(UserResult(user, error))
        if applied and self.path is not None:
            if self._keep is not None:
                self._keep(self.document())
            else:
                self._save(self.path)
        return results

    def _check(self, change: Deletion | Upsertion, duplicate: bool) -> ApiError | None:
        if not change.user:
            return UnacceptableCredentialError("Username must not be empty")
        if duplicate:
            return DuplicateResourceError(
                "A user credential cannot be altered twice in the same request"
            )
        mechanism = MECHANISM_NAMES.get(change.mechanism)
        if mechanism is None:
            return UnsupportedSaslMechanismError(f"Unknown SCRAM mechanism {change.mechanism}")
        if isinstance(change, Deletion):
            if self.store.scram_credential(mechanism, change.user) is None:
                return ResourceNotFoundError(
                    "Attempt to delete a user credential that does not exist"
                )
            return None
        if not MIN_ITERATIONS <= change.iterations <= MAX_ITERATIONS:
            return UnacceptableCredentialError(
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS} for "
                f"{mechanism}, got {change.iterations}"
            )
        if not change.salt:
            return UnacceptableCredentialError("Salt must not be empty")
        if not change.salted_password:
            return UnacceptableCredentialError("Salted password must not be empty")
        return None

    def _apply(self, change: Deletion | Upsertion) -> None:
        mechanism = MECHANISM_NAMES[change.mechanism]
        if isinstance(change, Deletion):
            self.store.remove_scram_credential(mechanism, change.user)
            return
        algorithm = SCRAM_ALGORITHMS[mechanism]
        client_key = algorithm.hmac(change.salted_password, b"Client Key")
        credential = ScramCredential(
            salt=change.salt,
            iterations=change.iterations,
            stored_key=algorithm.h(client_key),
            server_key=algorithm.hmac(change.salted_password, b"Server Key"),
        )
        self.store.add_scram_credential(mechanism, change.user, credential)

    # ---- persistence

    def document(self) -> str:
        """The credentials file's content: every SCRAM credential, without passwords."""
        entries = []
        for name in self.store.users:
            for mechanism in MECHANISM_IDS:
                credential = self.store.scram_credential(mechanism, name)
                if credential is not None:
                    entries.append(
                        {
                            "user": name,
                            "mechanism": mechanism,
                            "iterations": credential.iterations,
                            "salt": credential.salt.hex(),
                            "stored_key": credential.stored_key.hex(),
                            "server_key": credential.server_key.hex(),
                        }
                    )
        return json.dumps({"version": 1, "credentials": entries}, indent=1)

    def _save(self, path: str) -> None:
        write_atomically(path, self.document().encode())

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                document: Any = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise CredentialsFileError(
                f"cannot read the SCRAM credentials in {path}: {exc}"
            ) from None
        try:
            for entry in document["credentials"]:
                self.store.add_scram_credential(
                    entry["mechanism"],
                    entry["user"],
                    ScramCredential(
                        salt=bytes.fromhex(entry["salt"]),
                        iterations=int(entry["iterations"]),
                        stored_key=bytes.fromhex(entry["stored_key"]),
                        server_key=bytes.fromhex(entry["server_key"]),
                    ),
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise CredentialsFileError(f"bad SCRAM credentials file {path}: {exc!r}") from None
