"""KIP-714's client side as a plain state machine: when to ask GetTelemetrySubscriptions,
when to push, and what each answer changes. No I/O and no clock of its own: the runner
(:mod:`kafkette.client.telemetry.runner`) passes the time in, sends the requests this
builds and hands the answers back.

Theory of operation (KIP-714, as Java's ClientTelemetryReporter and librdkafka do it)::

    SUBSCRIPTION_NEEDED --request--> SUBSCRIPTION_IN_PROGRESS
        answer with metrics      -> PUSH_NEEDED, first push after 0.5-1.5 x the interval
        answer without metrics   -> SUBSCRIPTION_NEEDED, asked again after the interval
    PUSH_NEEDED --request--> PUSH_IN_PROGRESS
        answer 0                 -> PUSH_NEEDED after the interval
    close(): PUSH_NEEDED or PUSH_IN_PROGRESS -> TERMINATING_PUSH_NEEDED (at once)
        --request (terminating=True)--> TERMINATING_PUSH_IN_PROGRESS --answer--> TERMINATED
        without a subscription, close() goes straight to TERMINATED

Error codes in either answer (ClientTelemetryUtils' table):

- INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION, and any code not listed here:
  telemetry stops (``DISABLED``), as a retry could not succeed;
- UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE: subscriptions asked again at once;
- TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED: subscriptions asked again after the
  interval (the subscription's, or 5 minutes before there is one).

A request that fails (the connection broke) or that no connected broker supports waits
the interval (5 minutes without a subscription) and starts again from the subscription.
An answer's ``throttle_time_ms`` holds the next request back at least that long.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable

import attrs

from kafkette.errors import (
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from kafkette.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

DEFAULT_PUSH_INTERVAL_MS = 300_000
"""Java's wait before asking again when the broker gave no usable interval (5 minutes)."""
FIRST_PUSH_JITTER = (0.5, 1.5)
"""The first push after a subscription comes at a random point of this many intervals."""
SUPPORTED_COMPRESSION = frozenset({0, 1, 2, 3, 4})
"""none, gzip, snappy, lz4, zstd: every codec :mod:`kafkette.protocol.records.compression` has."""

_RETRY_NOW = frozenset({UnknownSubscriptionIdError.code, UnsupportedCompressionTypeError.code})
_RETRY_LATER = frozenset({TelemetryTooLargeError.code, ThrottlingQuotaExceededError.code})


class State(enum.Enum):
    """Where the client's telemetry stands (Java's ClientTelemetryState, plus DISABLED)."""

    SUBSCRIPTION_NEEDED = "subscription needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription in progress"
    PUSH_NEEDED = "push needed"
    PUSH_IN_PROGRESS = "push in progress"
    TERMINATING_PUSH_NEEDED = "terminating push needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating push in progress"
    TERMINATED = "terminated"
    DISABLED = "disabled"


_IN_PROGRESS = (
    State.SUBSCRIPTION_IN_PROGRESS,
    State.PUSH_IN_PROGRESS,
    State.TERMINATING_PUSH_IN_PROGRESS,
)
_FINAL = (State.TERMINATED, State.DISABLED)


@attrs.frozen
class Subscription:
    """What the broker asked for in GetTelemetrySubscriptions."""

    instance_id: uuid.UUID
    subscription_id: int
    interval_ms: int
    compression_type: int
    """The first of the broker's accepted types we have (0, none, when none is)."""
    delta: bool
    """Monotonic sums as deltas since the last push (else cumulative)."""
    prefixes: tuple[str, ...]
    """Metric name prefixes asked for; ``("",)`` is every metric, ``()`` none."""
    max_bytes: int

    def wants(self, name: str) -> bool:
        """Whether the metric ``name`` was asked for."""
        return any(name.startswith(prefix) for prefix in self.prefixes)


Payload = Callable[[Subscription], bytes]
"""Builds a push's metrics: OTLP MetricsData, compressed with the subscription's type."""


def _prefixes(requested: list[str]) -> tuple[str, ...]:
    if len(requested) == 1 and requested[0] == "*":  # Java's spelling of "all"
        return ("",)
    return tuple(requested)


def _compression(accepted: list[int]) -> int:
    return next((c for c in accepted if c in SUPPORTED_COMPRESSION), 0)


class TelemetryMachine:
    """One client instance's KIP-714 state; see the module's docstring."""

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self.state = State.SUBSCRIPTION_NEEDED
        self.subscription: Subscription | None = None
        self.next_at_ms = 0.0
        """When the next request is due (the first subscription request: at once)."""
        self.last_error = 0
        """The error code of the last answer that had one (0: none yet)."""
        self._rng = rng or random.Random()

    # ---- what to do next

    def due_in_ms(self, now_ms: float) -> float | None:
        """Milliseconds until the next request is due (0: now); None when none will be
        until an answer or :meth:`initiate_close` changes the state."""
        if self.state in _IN_PROGRESS or self.state in _FINAL:
            return None
        if self.state is State.TERMINATING_PUSH_NEEDED:
            return 0.0
        return max(0.0, self.next_at_ms - now_ms)

    def next_request(
        self, now_ms: float, payload: Payload
    ) -> GetTelemetrySubscriptionsRequest | PushTelemetryRequest | None:
        """The request due now, its state set in progress; None when none is due."""
        due = self.due_in_ms(now_ms)
        if due is None or due > 0:
            return None
        if self.state is State.SUBSCRIPTION_NEEDED:
            self.state = State.SUBSCRIPTION_IN_PROGRESS
            known = self.subscription
            return GetTelemetrySubscriptionsRequest(
                client_instance_id=known.instance_id if known is not None else uuid.UUID(int=0)
            )
        subscription = self.subscription
        assert subscription is not None  # PUSH_NEEDED and TERMINATING_* only come with one
        terminating = self.state is State.TERMINATING_PUSH_NEEDED
        metrics = payload(subscription)
        if len(metrics) > subscription.max_bytes and not terminating:
            # larger than the broker takes: this round is skipped, not sent to be refused
            self.next_at_ms = now_ms + subscription.interval_ms
            return None
        self.state = State.TERMINATING_PUSH_IN_PROGRESS if terminating else State.PUSH_IN_PROGRESS
        return PushTelemetryRequest(
            client_instance_id=subscription.instance_id,
            subscription_id=subscription.subscription_id,
            terminating=terminating,
            compression_type=subscription.compression_type,
            metrics=metrics if len(metrics) <= subscription.max_bytes else b"",
        )

    # ---- answers

    def on_subscriptions(self, response: GetTelemetrySubscriptionsResponse, now_ms: float) -> None:
        """A GetTelemetrySubscriptions answer."""
        if self.state is not State.SUBSCRIPTION_IN_PROGRESS:
            return  # closed while it was under way
        self._on_subscriptions(response, now_ms)
        self._throttled(response.throttle_time_ms, now_ms)

    def _on_subscriptions(self, response: GetTelemetrySubscriptionsResponse, now_ms: float) -> None:
        if response.error_code != 0:
            self._error(response.error_code, now_ms)
            return
        if response.client_instance_id.int == 0:
            self.state = State.DISABLED  # no instance id to push under (Java refuses it too)
            return
        interval = response.push_interval_ms
        subscription = Subscription(
            instance_id=response.client_instance_id,
            subscription_id=response.subscription_id,
            interval_ms=interval if interval > 0 else DEFAULT_PUSH_INTERVAL_MS,
            compression_type=_compression(response.accepted_compression_types),
            delta=response.delta_temporality,
            prefixes=_prefixes(response.requested_metrics),
            max_bytes=response.telemetry_max_bytes,
        )
        self.subscription = subscription
        if not subscription.prefixes:
            self.state = State.SUBSCRIPTION_NEEDED
            self.next_at_ms = now_ms + subscription.interval_ms
            return
        self.state = State.PUSH_NEEDED
        low, high = FIRST_PUSH_JITTER
        self.next_at_ms = now_ms + round(self._rng.uniform(low, high) * subscription.interval_ms)

    def on_push(self, response: PushTelemetryResponse, now_ms: float) -> None:
        """A PushTelemetry answer."""
        if self.state is State.TERMINATING_PUSH_IN_PROGRESS:
            self.state = State.TERMINATED
            self.last_error = response.error_code or self.last_error
            return
        if self.state is not State.PUSH_IN_PROGRESS:
            return
        if response.error_code != 0:
            self._error(response.error_code, now_ms)
        else:
            assert self.subscription is not None
            self.state = State.PUSH_NEEDED
            self.next_at_ms = now_ms + self.subscription.interval_ms
        self._throttled(response.throttle_time_ms, now_ms)

    def _throttled(self, throttle_ms: int, now_ms: float) -> None:
        if throttle_ms > 0 and self.state in (State.SUBSCRIPTION_NEEDED, State.PUSH_NEEDED):
            self.next_at_ms = max(self.next_at_ms, now_ms + throttle_ms)

    def on_failure(self, now_ms: float) -> None:
        """The request in progress got no answer (the connection broke, it timed out), or
        none could be sent (no connected broker supports the API): start over later."""
        if self.state is State.TERMINATING_PUSH_IN_PROGRESS:
            self.state = State.TERMINATED
            return
        if self.state in _FINAL or self.state is State.TERMINATING_PUSH_NEEDED:
            return
        self.state = State.SUBSCRIPTION_NEEDED
        self.next_at_ms = now_ms + self._interval_ms()

    def _error(self, code: int, now_ms: float) -> None:
        self.last_error = code
        if code in _RETRY_NOW:
            self.state = State.SUBSCRIPTION_NEEDED
            self.next_at_ms = now_ms
        elif code in _RETRY_LATER:
            self.state = State.SUBSCRIPTION_NEEDED
            self.next_at_ms = now_ms + self._interval_ms()
        else:  # INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION, or unknown
            self.state = State.DISABLED

    def _interval_ms(self) -> int:
        known = self.subscription
        return known.interval_ms if known is not None else DEFAULT_PUSH_INTERVAL_MS

    # ---- closing

    def initiate_close(self) -> bool:
        """The client is closing: True when a terminating push is now due."""
        if self.state in (State.PUSH_NEEDED, State.PUSH_IN_PROGRESS):
            self.state = State.TERMINATING_PUSH_NEEDED
            return True
        if self.state not in _FINAL and self.state not in (
            State.TERMINATING_PUSH_NEEDED,
            State.TERMINATING_PUSH_IN_PROGRESS,
        ):
            self.state = State.TERMINATED
        return self.state is State.TERMINATING_PUSH_NEEDED

    def disable(self) -> None:
        """Stop for good: the client could not build or send what KIP-714 asks."""
        self.state = State.DISABLED

    def close(self) -> None:
        """Stop for good (after the terminating push, or when there is no time for it)."""
        if self.state is not State.DISABLED:
            self.state = State.TERMINATED
