"""What every server-side SASL mechanism provides, and how it fails."""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """The client failed to authenticate; the message is sent back to it."""


class ServerMechanism(Protocol):
    """One SASL exchange on the server side, without I/O.

    The authenticator feeds each client token to :meth:`evaluate` and sends
    back what it returns, until :attr:`complete`.
    """

    name: str

    @property
    def complete(self) -> bool:
        """Whether the client is authenticated."""

    @property
    def principal(self) -> str | None:
        """The authenticated user's name once :attr:`complete`."""

    @property
    def claimed_user(self) -> str | None:
        """The user name the client gave, once it has (for logs: authenticated or not)."""

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to a client token; raises :class:`AuthenticationFailed`."""
