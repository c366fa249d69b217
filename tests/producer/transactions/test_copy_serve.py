"""Exactly-once copy on ``kafkette serve``: our group Consumer and transactional
Producer in a consume -> produce -> send_offsets_to_transaction -> commit loop, with
injected aborts and a copier that dies with its transaction open and is replaced
(the new one fences it and resumes from the group's committed offsets), or a broker
SIGKILLed and restarted from its data directory.

The output read with read_committed must hold every input record exactly once, in
input order per partition."""

from __future__ import annotations

import time
from collections.abc import Callable

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from kafkette.errors import IllegalStateError, KafkaError
from tests.brokers import BrokerProcess
from tests.producer.transactions.helpers import confluent_read, read_all

PARTITIONS = 3
PER_PARTITION = 400
GROUP = "copier"
TXN_ID = "copier-tx"


class Copier:
    """One consume-transform-produce worker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            max_poll_records=60,
            fetch_max_wait_ms=50,
        )
        self.producer = Producer(
            bootstrap_servers=bootstrap, transactional_id=TXN_ID, max_block_ms=20_000
        )
        self.producer.init_transactions()
        self.consumer.subscribe(["in"])
        self.transactions = 0
        self.aborted = 0

    def step(
        self,
        *,
        abort: bool = False,
        leave_open: bool = False,
        before_end: Callable[[], object] | None = None,
    ) -> int | None:
        """Copy one poll's records in one transaction, committed (or aborted, then
        sought back to be copied again); the number of records, None if none came."""
        records = self.consumer.poll(200)
        if not records:
            return None
        self.producer.begin_transaction()
        offsets: dict[TopicPartition, int] = {}
        for tp, batch in records.items():
            for record in batch:
                self.producer.send("out", record.value, partition=tp.partition)
            offsets[tp] = batch[-1].offset + 1
        self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
        count = sum(len(batch) for batch in records.values())
        if before_end is not None:
            self.producer.flush()
            before_end()
        if leave_open:
            self.producer.flush()  # the records reach the log; the transaction stays open
            return count
        self.transactions += 1
        if abort:
            self.producer.abort_transaction()
            self.aborted += 1
            for tp, batch in records.items():
                self.consumer.seek(tp, batch[0].offset)  # copy them again
            return 0
        self.producer.commit_transaction()
        return count

    def recover(self) -> None:
        """After a failed step: abort the transaction (if it can be) and go back to the
        group's committed offsets; a producer that cannot abort is replaced."""
        try:
            self.producer.abort_transaction()
        except IllegalStateError:
            pass  # no transaction open (the failure came before begin_transaction)
        except KafkaError:
            self.producer.close(1)
            self.producer = Producer(
                bootstrap_servers=self.bootstrap, transactional_id=TXN_ID, max_block_ms=20_000
            )
            self.producer.init_transactions()
        assignment = self.consumer.assignment()
        committed = self.consumer.committed(assignment)
        for tp in assignment:
            offset = committed.get(tp)
            if offset is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset.offset)


def test_exactly_once_copy_with_aborts_and_a_replaced_copier(
    memory_broker: BrokerProcess,
) -> None:
    bootstrap = memory_broker.bootstrap
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("in", PARTITIONS), NewTopic("out", PARTITIONS)]).all()
    expected = {p: [f"{p}-{i}".encode() for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as source:
        for i in range(PER_PARTITION):
            for p in range(PARTITIONS):
                source.send("in", expected[p][i], partition=p)
    total = PARTITIONS * PER_PARTITION

    first = Copier(bootstrap)
    copied = 0
    deadline = time.monotonic() + 60
    while copied < total // 3:
        assert time.monotonic() < deadline
        copied += first.step(abort=first.transactions % 4 == 3) or 0
    # dies mid-transaction: records written, offsets sent, nothing committed
    while first.step(leave_open=True) is None:
        assert time.monotonic() < deadline
    first.consumer.close()

    second = Copier(bootstrap)  # fences the first producer, aborting its transaction
    while True:
        assert time.monotonic() < deadline, f"copied {copied} of {total}"
        done = second.step(abort=second.transactions % 5 == 2)
        if done is not None:
            copied += done
            continue
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            committed = admin.list_consumer_group_offsets(GROUP).all()
        if sum(o.offset for o in committed.values() if o is not None) == total:
            break
    second.consumer.close()
    second.producer.close()
    first.producer.close(1)
    assert first.aborted > 0 and second.aborted > 0

    out = read_all(bootstrap, "out", PARTITIONS, "read_committed")
    for p in range(PARTITIONS):
        assert [value for partition, _, value in out if partition == p] == expected[p]
    everything = read_all(bootstrap, "out", PARTITIONS, "read_uncommitted")
    assert len(everything) > total  # the aborted copies are in the log, filtered out
    # librdkafka, an independent reader, sees the same
    assert confluent_read(bootstrap, "out", PARTITIONS, "read_committed") == out
    assert confluent_read(bootstrap, "out", PARTITIONS, "read_uncommitted") == everything


def test_exactly_once_copy_across_a_broker_crash(disk_broker: BrokerProcess) -> None:
    """The same copy on ``kafkette serve --data-dir``, SIGKILLed and restarted mid-run:
    a transaction caught by the crash fails (or not) and is aborted, the copier rewinds
    to the group's committed offsets, and the output still holds every record once."""
    bootstrap = disk_broker.bootstrap
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("in", PARTITIONS), NewTopic("out", PARTITIONS)]).all()
    expected = {p: [f"{p}-{i}".encode() for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as source:
        for i in range(PER_PARTITION):
            for p in range(PARTITIONS):
                source.send("in", expected[p][i], partition=p)
    total = PARTITIONS * PER_PARTITION

    def restart() -> None:
        # the transaction's records and offsets are in; EndTxn comes after the restart
        disk_broker.kill()
        disk_broker.start()

    copier = Copier(bootstrap)
    copied = 0
    crashed = False
    deadline = time.monotonic() + 90
    while True:
        assert time.monotonic() < deadline, f"copied {copied} of {total}"
        crash = None
        if not crashed and copied >= total // 3:
            crash = restart
            crashed = True
        try:
            done = copier.step(abort=copier.transactions % 7 == 3, before_end=crash)
        except KafkaError:
            copier.recover()
            continue
        if done is not None:
            copied += done
            continue
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            committed = admin.list_consumer_group_offsets(GROUP).all()
        if sum(o.offset for o in committed.values() if o is not None) == total:
            break
    copier.consumer.close()
    copier.producer.close(5)

    out = read_all(bootstrap, "out", PARTITIONS, "read_committed")
    for p in range(PARTITIONS):
        assert [value for partition, _, value in out if partition == p] == expected[p]
    assert confluent_read(bootstrap, "out", PARTITIONS, "read_committed") == out
