"""The member's deadlines: next heartbeat, session, poll interval, auto commit.

Plain state; every method takes the time (milliseconds, any monotonic
origin), so the rules are tested without sleeping.
"""

from __future__ import annotations


class MemberTimers:
    """When to heartbeat, when the application stopped polling, when to auto-commit."""

    def __init__(
        self,
        *,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        max_poll_interval_ms: int,
        auto_commit_interval_ms: int,
        now_ms: float,
    ) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.last_heartbeat_ms = now_ms
        self.last_heartbeat_ok_ms = now_ms
        self.last_poll_ms = now_ms
        self.next_auto_commit_ms = now_ms + auto_commit_interval_ms

    # ---- heartbeats

    def reset_heartbeats(self, now_ms: float) -> None:
        """A generation just started: the session counts from now."""
        self.last_heartbeat_ms = now_ms
        self.last_heartbeat_ok_ms = now_ms

    def heartbeat_sent(self, now_ms: float) -> None:
        self.last_heartbeat_ms = now_ms

    def heartbeat_ok(self, now_ms: float) -> None:
        self.last_heartbeat_ok_ms = now_ms

    def heartbeat_failed(self, now_ms: float, retry_backoff_ms: int) -> None:
        """Retry sooner than a whole interval, but not at once."""
        self.last_heartbeat_ms = now_ms - self.heartbeat_interval_ms + retry_backoff_ms

    def heartbeat_due_in(self, now_ms: float) -> float:
        return max(self.last_heartbeat_ms + self.heartbeat_interval_ms - now_ms, 0.0)

    def session_expired(self, now_ms: float) -> bool:
        return now_ms - self.last_heartbeat_ok_ms >= self.session_timeout_ms

    # ---- poll interval

    def polled(self, now_ms: float) -> None:
        self.last_poll_ms = now_ms

    def poll_timeout_expired(self, now_ms: float) -> bool:
        return now_ms - self.last_poll_ms >= self.max_poll_interval_ms

    def poll_timeout_in(self, now_ms: float) -> float:
        return max(self.last_poll_ms + self.max_poll_interval_ms - now_ms, 0.0)

    # ---- auto commit

    def auto_commit_due(self, now_ms: float) -> bool:
        return now_ms >= self.next_auto_commit_ms

    def auto_commit_started(self, now_ms: float) -> None:
        self.next_auto_commit_ms = now_ms + self.auto_commit_interval_ms
