"""Produce answers: the error table, the decisions, and sequences of answers through the sender.

The first tests read :mod:`kafkette.producer.produce_outcomes` alone (no I/O).
The last drives the real :class:`Sender` against the scripted broker of
``test_sender.py`` with any sequence of per-partition answers drawn from the
table's outcomes, and checks what must hold whatever the broker says: each
record's future completes exactly once, a completed batch is never sent
again, the sequences a producer epoch uses have no gap, and an acknowledged
record is where its offset says.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.errors import (
    ERRORS,
    NONE,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    UnknownProducerIdError,
    make_error,
)
from kafkette.producer.accumulator import RecordAccumulator
from kafkette.producer.produce_outcomes import (
    OUTCOMES,
    BatchFacts,
    Decision,
    Outcome,
    RetryVerdict,
    Step,
    decide,
    outcome_for,
    outcome_of_error,
    refreshes_on_retry,
    retry_verdict,
)
from kafkette.protocol.messages import ProduceRequest, ProduceResponse
from kafkette.protocol.messages.produce_response import PartitionProduceResponse
from kafkette.protocol.records import RecordBatch
from tests.producer.test_sender import TOPIC, FakeBroker, FakeClient, answer, config, run_sender

# ---- the table


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (0, Outcome.OK),
        (46, Outcome.DUPLICATE),  # DUPLICATE_SEQUENCE_NUMBER
        (6, Outcome.LEADER_MOVED),  # NOT_LEADER_OR_FOLLOWER
        (10, Outcome.TOO_LARGE),  # MESSAGE_TOO_LARGE
        (18, Outcome.TOO_LARGE),  # RECORD_LIST_TOO_LARGE
        (45, Outcome.OUT_OF_ORDER),  # OUT_OF_ORDER_SEQUENCE_NUMBER
        (59, Outcome.UNKNOWN_PRODUCER),  # UNKNOWN_PRODUCER_ID
        (3, Outcome.RETRY_REFRESH),  # UNKNOWN_TOPIC_OR_PARTITION
        (5, Outcome.RETRY_REFRESH),  # LEADER_NOT_AVAILABLE
        (56, Outcome.RETRY_REFRESH),  # KAFKA_STORAGE_ERROR
        (2, Outcome.RETRY),  # CORRUPT_MESSAGE
        (7, Outcome.RETRY),  # REQUEST_TIMED_OUT
        (19, Outcome.RETRY),  # NOT_ENOUGH_REPLICAS
        (20, Outcome.RETRY),  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
        (29, Outcome.FAIL),  # TOPIC_AUTHORIZATION_FAILED
        (47, Outcome.FAIL),  # INVALID_PRODUCER_EPOCH
        (87, Outcome.FAIL),  # INVALID_RECORD
        (9999, Outcome.FAIL),  # a code Kafka does not define
    ],
)
def test_outcome_of_each_kind_of_code(code: int, outcome: Outcome) -> None:
    assert outcome_for(code) is outcome


def test_codes_outside_the_table_follow_kafkas_retriable_flag() -> None:
    """Every error code Kafka defines has an outcome; the unlisted ones retry exactly
    when Kafka calls them retriable."""
    for code, info in ERRORS.items():
        outcome = outcome_for(code)
        if code in OUTCOMES:
            assert outcome is OUTCOMES[code]
            continue
        assert code != NONE
        retried = outcome in (Outcome.RETRY, Outcome.RETRY_REFRESH)
        assert retried == info.retriable, info.name


def test_errors_of_the_connection_have_outcomes_too() -> None:
    assert outcome_of_error(KafkaConnectionError("lost")) is Outcome.RETRY
    assert outcome_of_error(KafkaTimeoutError("late")) is Outcome.RETRY
    assert outcome_of_error(KafkaError("client")) is Outcome.FAIL
    assert outcome_of_error(make_error(45)) is Outcome.OUT_OF_ORDER


# ---- the decisions

IDEM = {"idempotent": True, "sequenced": True, "owned": True, "next_expected": True}


@pytest.mark.parametrize(
    ("outcome", "facts", "leader_known", "expected"),
    [
        (Outcome.OK, BatchFacts(3), False, Decision(Step.COMPLETE)),
        (Outcome.DUPLICATE, BatchFacts(3, **IDEM), False, Decision(Step.COMPLETE)),
        (Outcome.TOO_LARGE, BatchFacts(1), False, Decision(Step.FAIL)),
        (Outcome.TOO_LARGE, BatchFacts(1, **IDEM), False, Decision(Step.FAIL)),
        (Outcome.TOO_LARGE, BatchFacts(2), False, Decision(Step.SPLIT)),
        (
            Outcome.TOO_LARGE,
            BatchFacts(2, **IDEM),
            False,
            Decision(Step.SPLIT, bump_epoch=True, resync=True),
        ),
        (
            Outcome.TOO_LARGE,
            BatchFacts(2, transactional=True, **IDEM),
            False,
            Decision(Step.SPLIT, reuse_sequences=True, resync=True),
        ),
        (
            # sequenced under an earlier epoch: the parts need new sequences
            Outcome.TOO_LARGE,
            BatchFacts(2, idempotent=True, transactional=True, sequenced=True),
            False,
            Decision(Step.SPLIT, bump_epoch=True, resync=True),
        ),
        (Outcome.OUT_OF_ORDER, BatchFacts(1), False, Decision(Step.FAIL)),
        (Outcome.UNKNOWN_PRODUCER, BatchFacts(1), False, Decision(Step.FAIL)),
        (Outcome.OUT_OF_ORDER, BatchFacts(1, **IDEM), False, Decision(Step.FAIL, bump_epoch=True)),
        (
            Outcome.UNKNOWN_PRODUCER,
            BatchFacts(1, **IDEM),
            False,
            Decision(Step.RETRY, bump_epoch=True),
        ),
        (
            Outcome.OUT_OF_ORDER,
            BatchFacts(1, idempotent=True, sequenced=True, owned=True),
            False,
            Decision(Step.RETRY, count_attempt=False),
        ),
        (
            Outcome.UNKNOWN_PRODUCER,
            BatchFacts(1, idempotent=True, sequenced=True, owned=True, transactional=True),
            False,
            Decision(Step.RETRY, count_attempt=False),
        ),
        (
            Outcome.OUT_OF_ORDER,
            BatchFacts(1, transactional=True, **IDEM),
            False,
            Decision(Step.FAIL),
        ),
        (
            Outcome.UNKNOWN_PRODUCER,
            BatchFacts(1, transactional=True, **IDEM),
            False,
            Decision(Step.FAIL),
        ),
        (Outcome.RETRY, BatchFacts(1, **IDEM), False, Decision(Step.RETRY)),
        (
            Outcome.RETRY_REFRESH,
            BatchFacts(1),
            True,
            Decision(Step.RETRY, refresh_metadata=True),
        ),
        (Outcome.LEADER_MOVED, BatchFacts(1), False, Decision(Step.RETRY, refresh_metadata=True)),
        (Outcome.LEADER_MOVED, BatchFacts(1), True, Decision(Step.RETRY)),
        (Outcome.FAIL, BatchFacts(4, **IDEM), False, Decision(Step.FAIL)),
    ],
)
def test_decisions(
    outcome: Outcome, facts: BatchFacts, leader_known: bool, expected: Decision
) -> None:
    assert decide(outcome, facts, leader_known=leader_known) == expected


@given(
    st.sampled_from(Outcome),
    st.builds(
        BatchFacts,
        st.integers(1, 5),
        idempotent=st.booleans(),
        transactional=st.booleans(),
        sequenced=st.booleans(),
        owned=st.booleans(),
        next_expected=st.booleans(),
    ),
    st.booleans(),
)
def test_every_decision_is_coherent(
    outcome: Outcome, facts: BatchFacts, leader_known: bool
) -> None:
    """Only successes complete; a split needs several records; the epoch is bumped
    only for an idempotent producer, never inside a transaction."""
    decision = decide(outcome, facts, leader_known=leader_known)
    assert (decision.step is Step.COMPLETE) == (outcome in (Outcome.OK, Outcome.DUPLICATE))
    if decision.step is Step.SPLIT:
        assert outcome is Outcome.TOO_LARGE and facts.record_count > 1
    if decision.bump_epoch:
        assert facts.idempotent
        assert not (facts.transactional and decision.step is not Step.SPLIT)
    if decision.reuse_sequences:
        assert facts.transactional and facts.owned and decision.step is Step.SPLIT
    if not decision.count_attempt:
        assert decision.step is Step.RETRY and not facts.next_expected
    if decision.refresh_metadata:
        assert decision.step is Step.RETRY


# ---- retries


def verdict(error: KafkaError, **kwargs: Any) -> RetryVerdict:
    base: dict[str, Any] = {
        "aborted": False,
        "attempts": 0,
        "retries": 3,
        "count_attempt": True,
        "retry_at_ms": 100.0,
        "expires_at_ms": 1000.0,
    }
    base.update(kwargs)
    return retry_verdict(error, **base)


def test_retry_verdicts() -> None:
    retriable = NotEnoughReplicasError()
    assert verdict(retriable) is RetryVerdict.RETRY
    assert verdict(InvalidRecordError()) is RetryVerdict.FAIL
    assert verdict(OutOfOrderSequenceNumberError()) is RetryVerdict.RETRY
    assert verdict(UnknownProducerIdError()) is RetryVerdict.RETRY
    assert verdict(retriable, aborted=True) is RetryVerdict.ABORTED
    assert verdict(InvalidRecordError(), aborted=True) is RetryVerdict.FAIL
    assert verdict(retriable, attempts=3) is RetryVerdict.FAIL
    assert verdict(retriable, attempts=3, count_attempt=False) is RetryVerdict.RETRY
    assert verdict(retriable, retry_at_ms=1000.0) is RetryVerdict.EXPIRED
    assert verdict(retriable, retry_at_ms=999.0) is RetryVerdict.RETRY


def test_lost_connections_and_timeouts_refresh_the_metadata_on_retry() -> None:
    assert refreshes_on_retry(KafkaConnectionError("lost"))
    assert refreshes_on_retry(KafkaTimeoutError("late"))
    assert not refreshes_on_retry(RequestTimedOutError())
    assert not refreshes_on_retry(NotEnoughReplicasError())


# ---- sequences of answers through the sender

ANSWERS = {
    # kind -> (error code, stored by the broker)
    "ok": (0, True),
    "leader_moved": (6, False),
    "not_enough_replicas": (19, False),
    "after_append": (20, True),  # NOT_ENOUGH_REPLICAS_AFTER_APPEND: written, yet an error
    "request_timed_out": (7, False),
    "too_large": (10, False),
    "out_of_order": (45, False),
    "unknown_producer": (59, False),
    "invalid_record": (87, False),
}
FAILURES = (InvalidRecordError, MessageTooLargeError, OutOfOrderSequenceNumberError)
"""What a record may fail with here: retries and delivery.timeout.ms are not limiting
(and, without idempotence, UNKNOWN_PRODUCER_ID too)."""


def covered_without_gap(ranges: set[tuple[int, int]]) -> bool:
    """Whether the sequence ranges [base, base + count) cover 0..max with no hole."""
    end = 0
    for base, count in sorted(ranges):
        if base > end:
            return False
        end = max(end, base + count)
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["ok", "ok", *ANSWERS, "lose", "drop"]),
        min_size=10,
        max_size=40,
    ),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
)
def test_any_sequence_of_answers_completes_each_record_once(
    plan: list[str], partitions: int, submitting: bool, idempotent: bool
) -> None:
    """Whatever the broker answers, batch by batch: each future completes once, a
    completed batch is not sent again, each epoch's sequences have no gap, and an
    acknowledged record is at its offset (without idempotence too, where a record
    written before a lost answer may be stored twice)."""
    broker = FakeBroker()
    answers = iter(plan)
    completions: dict[bytes, list[Any]] = {}
    completed: set[bytes] = set()
    sent_ranges: dict[tuple[int, int, int], set[tuple[int, int]]] = {}
    stored_ranges: dict[tuple[int, int, int], list[tuple[int, int]]] = {}

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        fault = next(answers, "ok")
        batches = []
        for p in request.topic_data[0].partition_data:
            assert p.records is not None
            batch = RecordBatch.from_buffer(bytes(p.records))
            h = batch.header
            values = [r.value for r in batch]
            assert not completed.intersection(v for v in values if v is not None)
            key = (h.producer_id, h.producer_epoch, p.index)
            sent_ranges.setdefault(key, set()).add((h.base_sequence, len(values)))
            batches.append((p, h, values, key))
        if fault == "lose":
            raise KafkaConnectionError("lost before the broker saw it")
        replies = []
        for p, h, values, key in batches:
            assert p.records is not None
            code, stored = ANSWERS.get(fault, (0, True))
            if stored:
                before = len(broker.log.get(p.index, []))
                reply = broker.append(p.index, bytes(p.records))
                if len(broker.log[p.index]) > before:
                    stored_ranges.setdefault(key, []).append((h.base_sequence, len(values)))
                if reply.error_code == 0 and code:
                    reply = PartitionProduceResponse(p.index, code)
            else:
                reply = PartitionProduceResponse(p.index, code)
            replies.append(reply)
        await anyio.sleep(0)
        if fault == "drop":
            raise KafkaConnectionError("lost after the append")
        return answer(*replies)

    client = FakeClient(handler, partitions=partitions)
    client.submitting = submitting
    sent: dict[int, list[bytes]] = {}
    futures: list[tuple[int, bytes, Any]] = []

    def on_delivery_for(value: bytes) -> Any:
        def on_delivery(error: BaseException | None, metadata: Any) -> None:
            completions.setdefault(value, []).append(error or metadata)
            completed.add(value)

        return on_delivery

    async def body(acc: RecordAccumulator) -> None:
        for i in range(120):
            partition = i % partitions
            value = b"%d" % i
            sent.setdefault(partition, []).append(value)
            future = acc.append(TOPIC, partition, i, None, value, (), on_delivery_for(value))
            futures.append((partition, value, future))
            if i % 17 == 0:
                await anyio.sleep(0)
        for _, _, future in futures:
            with contextlib.suppress(KafkaError):
                await future

    cfg = config(batch_size=120)
    if not idempotent:
        cfg = config(batch_size=120, enable_idempotence=False, acks=1)
    failures = FAILURES if idempotent else (*FAILURES, UnknownProducerIdError)
    sender = anyio.run(run_sender, client, cfg, body)
    assert sender.accumulator.incomplete == 0
    for partition, value, future in futures:
        [outcome] = completions[value]  # exactly once
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, failures), outcome
            assert future.exception(0) is outcome
        else:
            assert future.result(0) == outcome
            assert (outcome.partition, broker.log[partition][outcome.offset]) == (partition, value)
    assert all(pid >= 0 for pid, _, _ in sent_ranges) == idempotent
    for key, ranges in sent_ranges.items():
        assert not idempotent or covered_without_gap(ranges), (key, sorted(ranges))
    for key, stored in stored_ranges.items():  # each epoch's first batch at 0, then in turn
        assert not idempotent or [base for base, _ in stored] == list(
            itertools.accumulate((count for _, count in stored[:-1]), initial=0)
        ), key
