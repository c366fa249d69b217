"""Hypothesis over request sequences to a TransactionCoordinator built without a Broker
(tests/server/txn/test_coordinator.py's rig): whatever the producers send, in any
order, with current or stale epochs, and however time moves, no request raises, every
answer is one of the codes Kafka gives, and a coordinator started over the same logs
(a restart) holds exactly the metadata the running one holds, but for the last
producer id and epoch, which version 0 of ``__transaction_state`` does not keep."""

from __future__ import annotations

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkette.errors import (
    NO_ERROR,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from kafkette.server.txn.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata
from tests.server.txn.test_coordinator import make

IDS = ("a", "b")
PARTITIONS = [("t", 0), ("t", 1)]
ANSWERS = {
    NO_ERROR,
    ConcurrentTransactionsError.code,
    InvalidProducerEpochError.code,
    InvalidProducerIdMappingError.code,
    InvalidTxnStateError.code,
    ProducerFencedError.code,
}


def as_loaded(meta: TransactionMetadata) -> TransactionMetadata:
    return attrs.evolve(
        meta, last_producer_id=NO_PRODUCER_ID, last_producer_epoch=NO_PRODUCER_EPOCH
    )


class Producers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rig = make(expiration_ms=50_000)
        self.rig.cluster.create_topic("t", 2)
        self.answers: list[int] = []

    def _producer(self, tid: str, stale: bool) -> tuple[int, int]:
        meta = self.rig.coordinator.transactions.get(tid)
        if meta is None:
            return 999, 0
        return meta.producer_id, meta.producer_epoch - 1 if stale else meta.producer_epoch

    @rule(tid=st.sampled_from(IDS), timeout=st.sampled_from([1_000, 60_000]), resume=st.booleans())
    def init(self, tid: str, timeout: int, resume: bool) -> None:
        meta = self.rig.coordinator.transactions.get(tid)
        if resume and meta is not None:
            result = self.rig.coordinator.init_producer_id(
                tid, timeout, meta.producer_id, meta.producer_epoch
            )
        else:
            result = self.rig.coordinator.init_producer_id(tid, timeout)
        self.answers.append(result.error)

    @rule(
        tid=st.sampled_from(IDS),
        partitions=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=2),
        stale=st.booleans(),
    )
    def add(self, tid: str, partitions: list[tuple[str, int]], stale: bool) -> None:
        pid, epoch = self._producer(tid, stale)
        self.answers.append(self.rig.coordinator.add_partitions(tid, pid, epoch, partitions))

    @rule(tid=st.sampled_from(IDS), group=st.sampled_from(["g", "h"]), stale=st.booleans())
    def add_offsets(self, tid: str, group: str, stale: bool) -> None:
        pid, epoch = self._producer(tid, stale)
        self.answers.append(self.rig.coordinator.add_offsets(tid, pid, epoch, group))

    @rule(tid=st.sampled_from(IDS), commit=st.booleans(), stale=st.booleans())
    def end(self, tid: str, commit: bool, stale: bool) -> None:
        pid, epoch = self._producer(tid, stale)
        self.answers.append(self.rig.coordinator.end_transaction(tid, pid, epoch, commit))

    @rule(ms=st.sampled_from([1, 999, 1_001, 60_001]))
    def wait(self, ms: int) -> None:
        self.rig.clock.advance(ms)
        self.rig.coordinator.tick()

    @invariant()
    def answers_are_kafkas(self) -> None:
        assert set(self.answers) <= ANSWERS

    @invariant()
    def a_restart_holds_the_same_metadata(self) -> None:
        running = {tid: as_loaded(m) for tid, m in self.rig.coordinator.transactions.items()}
        restarted = make(self.rig.clock, self.rig.cluster, expiration_ms=50_000)
        assert restarted.coordinator.transactions == running


Producers.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_restart_equivalence = Producers.TestCase
