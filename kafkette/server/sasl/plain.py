"""SASL PLAIN on the server (RFC 4616): one message, ``authzid NUL authcid NUL passwd``."""

from __future__ import annotations

from kafkette.server.sasl.credentials import PLAIN, CredentialStore
from kafkette.server.sasl.mechanism import AuthenticationFailed

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainServer:
    """Checks one PLAIN message against a :class:`CredentialStore`."""

    name = PLAIN

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self._principal: str | None = None
        self._claimed: str | None = None

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def claimed_user(self) -> str | None:
        return self._claimed

    def evaluate(self, token: bytes) -> bytes:
        """Authenticate from the client's only message; the answer is empty."""
        if self.complete:
            raise AuthenticationFailed("Authentication failed: PLAIN is already complete")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(
                "Authentication failed: the PLAIN message is not UTF-8"
            ) from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                "Authentication failed: the PLAIN message must be authzid NUL username NUL password"
            )
        authzid, username, password = parts
        self._claimed = username or None
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if not self._store.check_plain(username, password):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        self._principal = username
        return b""
