"""Share sessions (KIP-932): which partitions a member's ShareFetches cover, by epoch.

The rules are Kafka's ``SharePartitionManager.newContext`` and
``acknowledgeSessionUpdate`` with its ``ShareSessionCache``:

- A ShareFetch with epoch 0 opens a session for (group, member), replacing any
  it had, with the partitions it names; it may not carry acknowledgements
  (INVALID_REQUEST). Past ``group.share.max.share.sessions`` sessions on the
  broker it fails with SHARE_SESSION_LIMIT_REACHED.
- Later ShareFetches carry the session's next epoch (1, 2, ... wrapping to 1
  after 2**31-1), add the partitions they name and drop the forgotten ones; a
  missing session is SHARE_SESSION_NOT_FOUND, another epoch
  INVALID_SHARE_SESSION_EPOCH.
- Epoch -1 is the last request: acknowledgements only; then the session ends
  (:meth:`ShareSessions.release`) and the member's acquired records in its
  partitions go back (``SharePartition.release_member``). A ShareAcknowledge
  follows the same epochs but never opens a session (epoch 0 is
  INVALID_SHARE_SESSION_EPOCH).
- A session also ends when its connection closes (:meth:`ShareSessions.disconnect`).
  A connection is known by its peer's ``host:port``, or, where peers do not tell
  connections apart (the in-process streams of ``memory://`` all come from the cluster's
  URL), by :data:`connection_key`, which such a transport sets for its requests.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterable

import attrs

from kafkette.errors import (
    InvalidRequestError,
    InvalidShareSessionEpochError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[uuid.UUID, int]

connection_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kafkette_share_connection", default=None
)
"""The connection a request came over, set by a transport whose peers' addresses do not
tell connections apart (in-process streams); None: the peer's ``host:port`` does."""


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ShareRequestMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@attrs.define
class ShareSession:
    """One member's share session."""

    group_id: str
    member_id: str
    epoch: int
    """The epoch its next request must carry."""
    partitions: dict[TopicPartition, None]
    """Its partitions, in the order they were added."""
    connection_id: str = ""


class ShareSessions:
    """The broker's share sessions (Kafka's ShareSessionCache)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        """``max_sessions``: ``group.share.max.share.sessions``."""
        if max_sessions < 1:
            raise ValueError(f"max_sessions {max_sessions} is below 1")
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member's session, if it has one."""
        return self._sessions.get((group_id, member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        fetch: Iterable[TopicPartition] = (),
        forget: Iterable[TopicPartition] = (),
        has_acknowledgements: bool = False,
        connection_id: str = "",
    ) -> ShareSession:
        """Check a ShareFetch's session epoch and apply it to the session.

        Returns the session the request is served in: for epoch -1 the session
        still holds its partitions; the caller ends it with :meth:`release` once
        the acknowledgements are applied.
        """
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise InvalidRequestError(
                    "Acknowledge data present in Initial Fetch Request for group "
                    f"{group_id} member {member_id}"
                )
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionLimitReachedError(
                    f"The limit of {self.max_sessions} share sessions has been reached."
                )
            session = ShareSession(
                group_id, member_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(fetch), connection_id
            )
            self._sessions[key] = session
            return session
        session = self._existing(key)
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise InvalidShareSessionEpochError(
                f"Share session epoch {epoch} for member {member_id} of group {group_id} is not "
                f"the expected {session.epoch}."
            )
        for tp in fetch:
            session.partitions.setdefault(tp, None)
        for tp in forget:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)
        return session

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """Check a ShareAcknowledge's session epoch (and move it on)."""
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpochError(
                "A ShareAcknowledge cannot open a share session (epoch 0)."
            )
        session = self._existing((group_id, member_id))
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise InvalidShareSessionEpochError(
                f"Share session epoch {epoch} for member {member_id} of group {group_id} is not "
                f"the expected {session.epoch}."
            )
        session.epoch = next_epoch(session.epoch)
        return session

    def release(self, group_id: str, member_id: str) -> list[TopicPartition]:
        """End the member's session; the partitions whose acquired records of
        the member must go back."""
        session = self._existing((group_id, member_id))
        del self._sessions[(group_id, member_id)]
        return list(session.partitions)

    def disconnect(self, connection_id: str) -> list[ShareSession]:
        """End the sessions opened over a connection that closed."""
        gone = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in gone:
            del self._sessions[(session.group_id, session.member_id)]
        return gone

    def _existing(self, key: tuple[str, str]) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(
                f"No share session for member {key[1]} of group {key[0]}."
            )
        return session
