"""One member's side of a share group's heartbeat (KIP-932), without I/O.

Theory of operation. The broker assigns (Kafka's simple share assignor) and a share
member has nothing to reconcile: a partition may be read by many members at once, so
the assignment a ShareGroupHeartbeat answer carries is the member's at once. The member
makes its own id (a random UUID, as Java's ``Uuid.randomUuid()``), joins with epoch 0
and its subscribed topics, then heartbeats with the epoch each answer gives, every
``heartbeat_interval_ms`` the broker says (``group.share.heartbeat.interval.ms``).

- UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH fence it: it joins again with epoch 0, its
  assignment gone until the broker answers.
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS: the runner
  looks the coordinator up again and retries after the retry backoff.
- Any other error is fatal (GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND for a group
  id held by a consumer group, INVALID_REQUEST...): ``poll`` raises it.
- Leaving is one heartbeat with epoch -1 (:meth:`ShareMembership.leave_request`).

No I/O: :mod:`kafkette.consumer.share.core` sends what this class builds.
"""

from __future__ import annotations

import base64
import uuid

from kafkette.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    KafkaError,
    NotCoordinatorError,
    UnknownMemberIdError,
    make_error,
)
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
DEFAULT_INTERVAL_MS = 5_000
"""The interval until the broker says its own (Kafka's ``group.share.heartbeat.interval.ms``
default)."""

_FENCING = {UnknownMemberIdError.code, FencedMemberEpochError.code}
_COORDINATOR = {
    NotCoordinatorError.code,
    CoordinatorNotAvailableError.code,
    CoordinatorLoadInProgressError.code,
}


def new_member_id() -> str:
    """A random member id in Kafka's ``Uuid.toString()`` form (URL-safe base64, 22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMembership:
    """A share group member's epoch, assignment and heartbeat timing."""

    def __init__(self, group_id: str, *, rack_id: str | None = None) -> None:
        self.group_id = group_id
        self.member_id = new_member_id()
        self.rack_id = rack_id
        self.epoch = JOIN_EPOCH
        self.topics: list[str] = []
        """The subscribed topic names (empty: not subscribed)."""
        self.assignment: dict[uuid.UUID, list[int]] = {}
        """The partitions the broker gave, by topic id."""
        self.interval_ms = DEFAULT_INTERVAL_MS
        self.next_ms = 0.0
        """When the next heartbeat is due (0: at once)."""
        self.error: KafkaError | None = None
        """A fatal error the broker answered, raised by the next ``poll``."""
        self.answers = 0
        """Successful answers so far (a poll waiting for a first assignment watches it)."""
        self._sent_topics: list[str] | None = None

    @property
    def subscribed(self) -> bool:
        return bool(self.topics)

    def subscribe(self, topics: list[str]) -> None:
        """Follow ``topics``; the next heartbeat (due at once) tells the broker."""
        self.topics = sorted(set(topics))
        self.error = None
        self.next_ms = 0.0

    def unsubscribe(self) -> None:
        """Stop following topics; the runner sends :meth:`leave_request`, then the member
        may join again later with epoch 0."""
        self.topics = []
        self.assignment = {}
        self.epoch = JOIN_EPOCH
        self._sent_topics = None

    def due(self, now_ms: float) -> bool:
        return self.subscribed and self.error is None and now_ms >= self.next_ms

    def request(self) -> ShareGroupHeartbeatRequest:
        """The next heartbeat: the topics only when they changed (or on joining)."""
        topics = (
            self.topics if self.epoch == JOIN_EPOCH or self.topics != self._sent_topics else None
        )
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rack_id=self.rack_id,
            subscribed_topic_names=list(topics) if topics is not None else None,
        )

    def leave_request(self) -> ShareGroupHeartbeatRequest:
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_EPOCH
        )

    def on_answer(
        self,
        request: ShareGroupHeartbeatRequest,
        response: ShareGroupHeartbeatResponse,
        now_ms: float,
    ) -> bool:
        """Apply an answer to ``request``; True when the runner must find the
        coordinator again (and retry after the backoff)."""
        code = response.error_code
        if code == 0:
            if request.subscribed_topic_names is not None:
                self._sent_topics = list(request.subscribed_topic_names)
            self.epoch = response.member_epoch
            if response.heartbeat_interval_ms > 0:
                self.interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self.assignment = {
                    tp.topic_id: sorted(tp.partitions)
                    for tp in response.assignment.topic_partitions
                }
            self.next_ms = now_ms + self.interval_ms
            self.answers += 1
            return False
        if code in _FENCING:
            self.epoch = JOIN_EPOCH
            self.assignment = {}
            self._sent_topics = None
            self.next_ms = 0.0
            return False
        if code in _COORDINATOR:
            return True
        self.error = make_error(code, response.error_message)
        return False
