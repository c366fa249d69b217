"""SCRAM user operations of :class:`~kafkette.admin.AsyncAdminClient`, as Kafka's
``Admin.describeUserScramCredentials`` and ``Admin.alterUserScramCredentials``.

A password never leaves the client: an upsertion is sent as a random salt, an
iteration count and the salted password (PBKDF2 with the mechanism's hash), from
which the broker derives its keys. Results are per user, each a value or the
error the broker gave that user (RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL,
UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from enum import IntEnum

import anyio
import attrs

from kafkette.admin.groups import GroupOperations
from kafkette.admin.types import Outcome, Results
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import make_error
from kafkette.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkette.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kafkette.protocol.messages.describe_user_scram_credentials_request import UserName

DEFAULT_ITERATIONS = 4096
SALT_SIZE = 32


class ScramMechanism(IntEnum):
    """A SCRAM mechanism as the protocol numbers it."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name (``SCRAM-SHA-256``)."""
        return self.name.replace("_", "-")

    @classmethod
    def parse(cls, text: str) -> ScramMechanism:
        """``SCRAM-SHA-256``/``SCRAM-SHA-512`` (any case, ``-`` or ``_``); ValueError else."""
        key = text.strip().upper().replace("-", "_")
        if key not in ("SCRAM_SHA_256", "SCRAM_SHA_512"):
            raise ValueError(f"unknown SCRAM mechanism {text!r} (SCRAM-SHA-256, SCRAM-SHA-512)")
        return cls[key]


_HASHES = {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}


@attrs.frozen
class ScramCredentialInfo:
    """One credential of a user: its mechanism and iteration count."""

    mechanism: ScramMechanism
    iterations: int


@attrs.frozen
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (mechanisms and iterations; never keys)."""

    user: str
    credential_infos: tuple[ScramCredentialInfo, ...]


@attrs.frozen
class UserScramCredentialUpsertion:
    """Set ``user``'s password for ``mechanism`` (salted here; ``salt`` random unless given)."""

    user: str
    mechanism: ScramMechanism
    password: str = attrs.field(repr=False)
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = attrs.field(default=None, repr=False)


@attrs.frozen
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's ``Hi(password, salt, iterations)`` for ``mechanism``."""
    hash_name = _HASHES.get(mechanism)
    if hash_name is None:  # the broker answers UNSUPPORTED_SASL_MECHANISM for it
        return b""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, max(iterations, 1))


class ScramOperations(GroupOperations):
    """The SCRAM user half of the admin client (mixed into AsyncAdminClient)."""

    async def describe_user_scram_credentials(
        self,
        users: Iterable[str] | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, UserScramCredentialsDescription]:
        """The SCRAM credentials of ``users`` (every user for None), per user."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        names = None if users is None else list(users)
        request = DescribeUserScramCredentialsRequest(
            users=None if names is None else [UserName(name=n) for n in names]
        )

        async def attempt() -> DescribeUserScramCredentialsResponse:
            node = await self._client.any_node()
            response = await self._client.send(node, request)
            assert isinstance(response, DescribeUserScramCredentialsResponse)
            return response

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        response = await self._until_done(attempt, "describe SCRAM users", deadline)
        if response.error_code:
            raise make_error(response.error_code, response.error_message)
        outcomes: dict[str, Outcome[UserScramCredentialsDescription]] = {}
        for result in response.results:
            if result.error_code:
                outcomes[result.user] = Outcome(
                    error=make_error(result.error_code, result.error_message)
                )
                continue
            infos = tuple(
                ScramCredentialInfo(ScramMechanism(i.mechanism), i.iterations)
                for i in result.credential_infos
            )
            outcomes[result.user] = Outcome(UserScramCredentialsDescription(result.user, infos))
        return Results(outcomes)

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialAlteration],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        """Upsert and delete SCRAM credentials; per user, None or the user's error."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        deletions = []
        upsertions = []
        for alteration in alterations:
            if isinstance(alteration, UserScramCredentialDeletion):
                deletions.append(
                    ScramCredentialDeletion(
                        name=alteration.user, mechanism=int(alteration.mechanism)
                    )
                )
                continue
            salt = alteration.salt or secrets.token_bytes(SALT_SIZE)
            upsertions.append(
                ScramCredentialUpsertion(
                    name=alteration.user,
                    mechanism=int(alteration.mechanism),
                    iterations=alteration.iterations,
                    salt=salt,
                    salted_password=salted_password(
                        alteration.mechanism, alteration.password, salt, alteration.iterations
                    ),
                )
            )
        request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)

        async def attempt() -> AlterUserScramCredentialsResponse:
            node = await self._client.any_node()
            response = await self._client.send(node, request)
            assert isinstance(response, AlterUserScramCredentialsResponse)
            return response

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        response = await self._until_done(attempt, "alter SCRAM users", deadline)
        outcomes: dict[str, Outcome[None]] = {}
        for result in response.results:
            error = (
                make_error(result.error_code, result.error_message) if result.error_code else None
            )
            outcomes[result.user] = Outcome(None, error)
        return Results(outcomes)
