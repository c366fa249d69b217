"""KIP-714's client state machine driven by answers and time passed in: when it asks,
when it pushes, what each error code does, and the terminating push."""

from __future__ import annotations

import random
import uuid

import pytest

from kafkette.client.telemetry.state import (
    DEFAULT_PUSH_INTERVAL_MS,
    State,
    Subscription,
    TelemetryMachine,
)
from kafkette.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

INSTANCE = uuid.UUID("12345678-1234-5678-1234-567812345678")


def payload(subscription: Subscription) -> bytes:
    return b"metrics of " + str(subscription.subscription_id).encode()


def subscribed(
    requested: list[str] | None = None, *, interval_ms: int = 1000, **fields: object
) -> GetTelemetrySubscriptionsResponse:
    answer: dict[str, object] = {
        "client_instance_id": INSTANCE,
        "subscription_id": 7,
        "accepted_compression_types": [4, 3, 1, 2],
        "push_interval_ms": interval_ms,
        "telemetry_max_bytes": 1 << 20,
        "delta_temporality": True,
        "requested_metrics": ["org.apache.kafka.producer."] if requested is None else requested,
    }
    answer.update(fields)
    return GetTelemetrySubscriptionsResponse(**answer)  # type: ignore[arg-type]


def state_of(machine: TelemetryMachine) -> State:
    """The state, read through a call (mypy keeps no narrowing across one)."""
    return machine.state


def pushing(now_ms: float = 0.0, rng: random.Random | None = None) -> TelemetryMachine:
    """A machine that holds a subscription (interval 1000 ms) and waits to push."""
    machine = TelemetryMachine(rng=rng or random.Random(1))
    request = machine.next_request(now_ms, payload)
    assert isinstance(request, GetTelemetrySubscriptionsRequest)
    machine.on_subscriptions(subscribed(), now_ms)
    assert machine.state is State.PUSH_NEEDED
    return machine


def test_first_asks_for_subscriptions_at_once_with_the_zero_instance_id() -> None:
    machine = TelemetryMachine()
    assert machine.due_in_ms(0.0) == 0.0
    request = machine.next_request(0.0, payload)
    assert request == GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))
    assert machine.state is State.SUBSCRIPTION_IN_PROGRESS
    assert machine.due_in_ms(0.0) is None  # nothing more until the answer
    assert machine.next_request(0.0, payload) is None


def test_a_subscription_is_kept_and_the_first_push_is_jittered_within_half_to_one_and_a_half() -> (
    None
):
    firsts = []
    for seed in range(50):
        machine = pushing(10_000.0, random.Random(seed))
        assert machine.subscription == Subscription(
            instance_id=INSTANCE,
            subscription_id=7,
            interval_ms=1000,
            compression_type=4,
            delta=True,
            prefixes=("org.apache.kafka.producer.",),
            max_bytes=1 << 20,
        )
        due = machine.due_in_ms(10_000.0)
        assert due is not None
        firsts.append(due)
    assert all(500 <= d <= 1500 for d in firsts)
    assert len(set(firsts)) > 10  # spread, not one fixed delay
    assert min(firsts) < 750 and max(firsts) > 1250


def test_pushes_come_every_interval_after_the_first() -> None:
    machine = pushing()
    first = machine.next_at_ms
    assert machine.next_request(first - 1, payload) is None
    request = machine.next_request(first, payload)
    assert request == PushTelemetryRequest(
        client_instance_id=INSTANCE,
        subscription_id=7,
        terminating=False,
        compression_type=4,
        metrics=b"metrics of 7",
    )
    assert machine.state is State.PUSH_IN_PROGRESS
    machine.on_push(PushTelemetryResponse(error_code=0), first + 5)
    assert state_of(machine) is State.PUSH_NEEDED
    assert machine.due_in_ms(first + 5) == 1000.0


def test_asks_again_with_its_instance_id_after_the_interval_when_no_metrics_are_requested() -> None:
    machine = TelemetryMachine()
    machine.next_request(0.0, payload)
    machine.on_subscriptions(subscribed([], interval_ms=2000), 0.0)
    assert machine.state is State.SUBSCRIPTION_NEEDED
    assert machine.due_in_ms(0.0) == 2000.0
    assert machine.next_request(1999.0, payload) is None
    request = machine.next_request(2000.0, payload)
    assert request == GetTelemetrySubscriptionsRequest(client_instance_id=INSTANCE)


def test_star_and_the_empty_prefix_mean_every_metric() -> None:
    for requested in (["*"], [""]):
        machine = TelemetryMachine()
        machine.next_request(0.0, payload)
        machine.on_subscriptions(subscribed(requested), 0.0)
        assert machine.subscription is not None
        assert machine.subscription.prefixes == ("",)
        assert machine.subscription.wants("org.apache.kafka.consumer.poll.idle.ratio.avg")


def test_an_interval_of_zero_means_java_s_default_and_unknown_codecs_are_skipped() -> None:
    machine = TelemetryMachine()
    machine.next_request(0.0, payload)
    machine.on_subscriptions(subscribed(interval_ms=0, accepted_compression_types=[9, 2]), 0.0)
    assert machine.subscription is not None
    assert machine.subscription.interval_ms == DEFAULT_PUSH_INTERVAL_MS
    assert machine.subscription.compression_type == 2
    machine2 = TelemetryMachine()
    machine2.next_request(0.0, payload)
    machine2.on_subscriptions(subscribed(accepted_compression_types=[]), 0.0)
    assert machine2.subscription is not None and machine2.subscription.compression_type == 0


@pytest.mark.parametrize("code", [42, 87, 35, 3])  # INVALID_REQUEST, INVALID_RECORD, ...
def test_errors_no_retry_can_mend_stop_pushing(code: int) -> None:
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    machine.on_push(PushTelemetryResponse(error_code=code), 2000.0)
    assert machine.state is State.DISABLED
    assert machine.last_error == code
    assert machine.due_in_ms(10**9) is None
    assert machine.next_request(10**9, payload) is None
    assert machine.initiate_close() is False  # no terminating push either


@pytest.mark.parametrize("code", [117, 76])  # UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION
def test_an_unknown_subscription_asks_for_subscriptions_again_at_once(code: int) -> None:
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    machine.on_push(PushTelemetryResponse(error_code=code), 2000.0)
    assert machine.state is State.SUBSCRIPTION_NEEDED
    assert machine.next_request(2000.0, payload) == GetTelemetrySubscriptionsRequest(
        client_instance_id=INSTANCE
    )


@pytest.mark.parametrize("code", [118, 89])  # TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED
def test_too_large_and_throttled_ask_again_after_the_interval(code: int) -> None:
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    machine.on_push(PushTelemetryResponse(error_code=code), 2000.0)
    assert machine.state is State.SUBSCRIPTION_NEEDED
    assert machine.due_in_ms(2000.0) == 1000.0


def test_a_throttled_subscription_request_waits_java_s_default_before_any_subscription() -> None:
    machine = TelemetryMachine()
    machine.next_request(0.0, payload)
    machine.on_subscriptions(GetTelemetrySubscriptionsResponse(error_code=89), 0.0)
    assert machine.state is State.SUBSCRIPTION_NEEDED
    assert machine.due_in_ms(0.0) == DEFAULT_PUSH_INTERVAL_MS


def test_a_failed_request_starts_over_from_the_subscription_after_the_interval() -> None:
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    machine.on_failure(3000.0)
    assert machine.state is State.SUBSCRIPTION_NEEDED
    assert machine.due_in_ms(3000.0) == 1000.0


def test_a_payload_larger_than_the_broker_takes_is_not_sent() -> None:
    machine = TelemetryMachine()
    machine.next_request(0.0, payload)
    machine.on_subscriptions(subscribed(telemetry_max_bytes=4), 0.0)
    at = machine.next_at_ms
    assert machine.next_request(at, payload) is None
    assert machine.state is State.PUSH_NEEDED
    assert machine.due_in_ms(at) == 1000.0


def test_close_pushes_once_more_with_terminating_set_then_stops() -> None:
    machine = pushing()
    assert machine.initiate_close() is True
    assert machine.due_in_ms(0.0) == 0.0  # at once, not at the interval
    request = machine.next_request(0.0, payload)
    assert isinstance(request, PushTelemetryRequest) and request.terminating
    assert machine.state is State.TERMINATING_PUSH_IN_PROGRESS
    assert machine.initiate_close() is False
    machine.on_push(PushTelemetryResponse(error_code=0), 1.0)
    assert state_of(machine) is State.TERMINATED
    assert machine.next_request(10**9, payload) is None


def test_close_during_a_push_still_sends_the_terminating_push() -> None:
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    assert machine.initiate_close() is True
    machine.on_push(PushTelemetryResponse(error_code=0), 2000.0)  # the earlier push's answer
    assert machine.state is State.TERMINATING_PUSH_NEEDED
    request = machine.next_request(2000.0, payload)
    assert isinstance(request, PushTelemetryRequest) and request.terminating


@pytest.mark.parametrize("asked", [False, True])
def test_close_without_a_subscription_sends_nothing(asked: bool) -> None:
    machine = TelemetryMachine()
    if asked:
        machine.next_request(0.0, payload)
    assert machine.initiate_close() is False
    assert machine.state is State.TERMINATED
    machine.on_subscriptions(subscribed(), 1.0)  # a late answer changes nothing
    assert machine.state is State.TERMINATED
    assert machine.next_request(10**9, payload) is None


def test_a_zero_instance_id_in_the_answer_disables_telemetry() -> None:
    machine = TelemetryMachine()
    machine.next_request(0.0, payload)
    machine.on_subscriptions(subscribed(client_instance_id=uuid.UUID(int=0)), 0.0)
    assert machine.state is State.DISABLED


def test_an_answer_s_throttle_time_holds_the_next_request_back() -> None:
    """UNKNOWN_SUBSCRIPTION_ID would ask again at once, but the answer throttles 700 ms;
    a successful push throttled longer than the interval waits the throttle."""
    machine = pushing()
    machine.next_request(machine.next_at_ms, payload)
    machine.on_push(PushTelemetryResponse(error_code=117, throttle_time_ms=700), 2000.0)
    assert machine.due_in_ms(2000.0) == 700.0
    machine.next_request(2700.0, payload)
    machine.on_subscriptions(subscribed(throttle_time_ms=5000), 2700.0)
    assert machine.due_in_ms(2700.0) == 5000.0  # more than the jittered first push
