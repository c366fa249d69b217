"""Transactions of confluent-kafka (librdkafka) against ``kafkette serve``.

- 20 transactions of 50 records over 3 partitions, every third aborted: a
  read_committed consumer sees exactly the committed records, in order, and a
  read_uncommitted one every record;
- zombie fencing: a second producer with the same transactional id fences the
  first, whose commit then fails with a fencing error; none of its records is
  ever visible to read_committed;
- consume-transform-produce: a group consumer's offsets sent with
  ``send_offsets_to_transaction`` are the group's only once the transaction
  commits, and never when it aborts.
- exactly-once copy, after Kafka's transactions system test: 100,000 source
  records over 3 partitions copied by a group of two copiers (consume,
  produce, ``send_offsets_to_transaction``, commit; one transaction in five
  aborted on purpose) that are SIGKILLed and restarted with their
  transactional id, while the broker (on disk) is SIGKILLed and restarted
  twice: the output read with read_committed holds every source record
  exactly once, in source order per partition.

The copier runs in a child process: ``python -m tests.conformance.test_transactions
copier BOOTSTRAP``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.brokers import BrokerProcess, kafkette_broker

PARTITIONS = 3
TXNS = 20
PER_TXN = 50
TIMEOUT_S = 30.0
OFFSET_INVALID = -1001


@pytest.fixture
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None, "--set", f"num.partitions={PARTITIONS}")


def producer(bootstrap: str, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
        }
    )


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> dict[int, list[bytes]]:
    """Every record of ``topic`` an assigned consumer reads from the start: ``expected``
    of them, then a last poll for any extra."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {}
    count = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                assert message.error() is None, message.error()
                seen.setdefault(message.partition() or 0, []).append(message.value() or b"")
                count += 1
        for message in consumer.consume(1000, 0.5):
            assert message.error() is None, message.error()
            seen.setdefault(message.partition() or 0, []).append(message.value() or b"")
    finally:
        consumer.close()
    return seen


def by_partition(values: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    result: dict[int, list[bytes]] = {}
    for partition, value in values:
        result.setdefault(partition, []).append(value)
    return result


def test_committed_and_aborted_transactions(server: BrokerProcess) -> None:
    """read_committed sees exactly the 14 committed transactions' records, in the order
    produced; read_uncommitted all 1,000."""
    p = producer(server.bootstrap, "batches")
    p.init_transactions(TIMEOUT_S)
    committed: list[tuple[int, bytes]] = []
    everything: list[tuple[int, bytes]] = []
    for t in range(TXNS):
        p.begin_transaction()
        for i in range(PER_TXN):
            value = b"%02d-%02d" % (t, i)
            partition = i % PARTITIONS
            p.produce("txns", value, partition=partition)
            everything.append((partition, value))
            if t % 3 != 2:
                committed.append((partition, value))
        if t % 3 == 2:
            p.flush(TIMEOUT_S)  # else librdkafka drops the records it has not sent yet
            p.abort_transaction(TIMEOUT_S)
        else:
            p.commit_transaction(TIMEOUT_S)
    assert len(committed) == 14 * PER_TXN
    read_committed = consume(server.bootstrap, "txns", "read_committed", len(committed))
    assert read_committed == by_partition(committed)
    read_uncommitted = consume(server.bootstrap, "txns", "read_uncommitted", len(everything))
    assert read_uncommitted == by_partition(everything)


def test_zombie_producer_is_fenced(server: BrokerProcess) -> None:
    """The older of two producers sharing a transactional id cannot commit: its commit
    raises a fatal fencing error and its records are never visible."""
    zombie = producer(server.bootstrap, "shared")
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce("fence", b"zombie-%d" % i, partition=0)
    zombie.flush(TIMEOUT_S)
    successor = producer(server.bootstrap, "shared")
    successor.init_transactions(TIMEOUT_S)  # fences the zombie, aborting its transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    assert error.fatal()
    successor.begin_transaction()
    for i in range(5):
        successor.produce("fence", b"successor-%d" % i, partition=0)
    successor.commit_transaction(TIMEOUT_S)
    seen = consume(server.bootstrap, "fence", "read_committed", 5)
    assert seen == {0: [b"successor-%d" % i for i in range(5)]}
    uncommitted = consume(server.bootstrap, "fence", "read_uncommitted", 15)
    assert uncommitted[0][:10] == [b"zombie-%d" % i for i in range(10)]


def committed_offsets(consumer: Consumer, topic: str, timeout_s: float = TIMEOUT_S) -> list[int]:
    found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout_s)
    return [tp.offset for tp in sorted(found, key=lambda tp: tp.partition)]


def test_send_offsets_to_transaction(server: BrokerProcess) -> None:
    """A copier's consumed positions become the group's committed offsets only when its
    transaction commits; an aborted transaction's offsets are dropped."""
    source = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(30):
        source.produce("source", b"%d" % i, partition=i % PARTITIONS)
    source.flush(TIMEOUT_S)
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "copier",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["source"])
    copier = producer(server.bootstrap, "copier-1")
    copier.init_transactions(TIMEOUT_S)
    try:
        copied = 0
        deadline = time.monotonic() + TIMEOUT_S
        copier.begin_transaction()
        while copied < 30 and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                copier.produce("sink", message.value(), partition=message.partition() or 0)
                copied += 1
        assert copied == 30
        positions = consumer.position(consumer.assignment())
        copier.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
        # A read_uncommitted consumer's OffsetFetch sees no offset yet; a read_committed
        # one asks for stable offsets (KIP-447) and is told UNSTABLE_OFFSET_COMMIT, which
        # librdkafka retries until the transaction ends (here: until its call times out).
        unstable_ok = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "copier",
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            assert committed_offsets(unstable_ok, "source") == [OFFSET_INVALID] * PARTITIONS
        finally:
            unstable_ok.close()
        with pytest.raises(KafkaException) as raised:
            committed_offsets(consumer, "source", timeout_s=1.0)
        assert raised.value.args[0].code() == KafkaError._TIMED_OUT
        copier.commit_transaction(TIMEOUT_S)
        assert committed_offsets(consumer, "source") == [10, 10, 10]
        # An aborted transaction's offsets never count.
        copier.begin_transaction()
        copier.produce("sink", b"dropped", partition=0)
        copier.send_offsets_to_transaction(
            [TopicPartition("source", p, 99) for p in range(PARTITIONS)],
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        copier.abort_transaction(TIMEOUT_S)
        assert committed_offsets(consumer, "source") == [10, 10, 10]
    finally:
        consumer.close()
    sink = consume(server.bootstrap, "sink", "read_committed", 30)
    assert sorted(v for values in sink.values() for v in values) == sorted(
        b"%d" % i for i in range(30)
    )


def test_transaction_left_open_past_its_timeout_is_aborted(server: BrokerProcess) -> None:
    """A producer that never ends its transaction: once transaction.timeout.ms passes the
    broker aborts it, the LSO moves past its records (a later transaction becomes
    readable) and its records never do; its late commit is refused as fenced."""
    stale = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "transactional.id": "slow",
            "transaction.timeout.ms": 1000,
            "message.timeout.ms": 1000,
        }
    )
    stale.init_transactions(TIMEOUT_S)
    stale.begin_transaction()
    for i in range(3):
        stale.produce("timeouts", b"stale-%d" % i, partition=0)
    stale.flush(TIMEOUT_S)
    fresh = producer(server.bootstrap, "fast")
    fresh.init_transactions(TIMEOUT_S)
    fresh.begin_transaction()
    fresh.produce("timeouts", b"after", partition=0)
    fresh.commit_transaction(TIMEOUT_S)
    # Readable only once the broker has aborted the stale transaction (about 1 s).
    assert consume(server.bootstrap, "timeouts", "read_committed", 1) == {0: [b"after"]}
    with pytest.raises(KafkaException) as raised:
        stale.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), error


def run_aiokafka(bootstrap: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aiokafka")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("peers", b"c1", partition=0)
            await p.begin_transaction()
            await p.send_and_wait("peers", b"a1", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait("peers", b"c2", partition=0)
        finally:
            await p.stop()

    asyncio.run(scenario())


def run_kafka_python(bootstrap: str) -> None:
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("peers", b"c1", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("peers", b"a1", partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send("peers", b"c2", partition=0)
        p.commit_transaction()
    finally:
        p.close()


@pytest.mark.parametrize("peer", ["aiokafka", "kafka-python"])
def test_other_clients_commit_and_abort(server: BrokerProcess, peer: str) -> None:
    """aiokafka's and kafka-python's transactional producers (older request versions):
    commit, abort, commit; read_committed sees the two committed records only."""
    (run_aiokafka if peer == "aiokafka" else run_kafka_python)(server.bootstrap)
    assert consume(server.bootstrap, "peers", "read_committed", 2) == {0: [b"c1", b"c2"]}
    assert consume(server.bootstrap, "peers", "read_uncommitted", 3) == {0: [b"c1", b"a1", b"c2"]}


# -- exactly-once copy ---------------------------------------------------------------------

COPY_RECORDS = 100_000
COPY_SOURCE = "copy-source"
COPY_SINK = "copy-sink"
COPY_GROUP = "copiers"
COPY_TIMEOUT_S = 150.0
STALL_S = 6.0
COPIERS = 2


def copier_main(bootstrap: str, transactional_id: str = "copier") -> None:
    """One copier: consume a batch, produce it to the same partition of the sink, send the
    positions with the transaction, commit (or, one time in five, abort and rewind to the
    committed offsets). Runs until killed; exits 2 on an error it cannot get past (the
    parent starts another copier, whose InitProducerId fences this one)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": COPY_GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 1000,
            "heartbeat.interval.ms": 200,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 10_000,
            "linger.ms": 5,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([COPY_SOURCE])
    rng = random.Random(os.getpid())

    def rewind() -> None:
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, 30):
            offset = tp.offset if tp.offset >= 0 else 0
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    while True:
        messages = [m for m in consumer.consume(2000, 0.2) if m.error() is None]
        if not messages:
            continue
        try:
            producer.begin_transaction()
            for m in messages:
                while True:
                    try:
                        producer.produce(COPY_SINK, m.value(), partition=m.partition() or 0)
                        break
                    except BufferError:
                        producer.poll(0.01)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if rng.random() < 0.2:
                producer.flush(30)  # the records reach the log, then are aborted
                producer.abort_transaction(30)
                rewind()
                continue
            while True:
                try:
                    producer.commit_transaction(30)
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal() or not error.txn_requires_abort():
                sys.exit(2)
            producer.abort_transaction(30)
            rewind()


class Copier:
    """A copier child process."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.conformance.test_transactions",
                "copier",
                bootstrap,
                transactional_id,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def copied(bootstrap: str) -> int:
    """How many source records the group has committed as copied."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": COPY_GROUP})
    try:
        found = consumer.committed([TopicPartition(COPY_SOURCE, p) for p in range(PARTITIONS)], 10)
    except KafkaException:
        return -1
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in found)


@pytest.fixture
def disk_server(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from kafkette_broker(
        tmp_path / "data",
        "--set",
        f"num.partitions={PARTITIONS}",
        "--set",
        "group.min.session.timeout.ms=500",
        "--set",
        "offsets.topic.num.partitions=5",
    )


def test_exactly_once_copy_across_copier_and_broker_kills(disk_server: BrokerProcess) -> None:
    """Every source record lands in the sink exactly once, in order per partition, whatever
    copiers and broker were killed on the way."""
    bootstrap = disk_server.bootstrap
    source = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(COPY_RECORDS):
        while True:
            try:
                source.produce(COPY_SOURCE, b"%06d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                source.poll(0.01)
    assert source.flush(30) == 0
    faults = [
        (0.15, "copier"),
        (0.35, "broker"),
        (0.55, "copier"),
        (0.75, "broker"),
    ]
    copiers = [Copier(bootstrap, f"copier-{n}") for n in range(COPIERS)]
    deadline = time.monotonic() + COPY_TIMEOUT_S
    progress = (0, time.monotonic())
    kills = 0
    try:
        while (done := copied(bootstrap)) < COPY_RECORDS:
            now = time.monotonic()
            assert now < deadline, f"copied {done} of {COPY_RECORDS}"
            if done != progress[0]:
                progress = (done, now)
            if faults and done >= faults[0][0] * COPY_RECORDS:
                _, target = faults.pop(0)
                if target == "copier":
                    copiers[kills % COPIERS].kill()
                    kills += 1
                else:
                    disk_server.kill()
                    disk_server.start()
            elif now - progress[1] > STALL_S:
                # librdkafka 2.16 can wait forever on a TxnOffsetCommit to a broker handle
                # it dropped when it re-bootstrapped (the broker was down), past the call's
                # timeout: such copiers are SIGKILLed like the others.
                for copier in copiers:
                    copier.kill()
                progress = (done, now)
            for n, copier in enumerate(copiers):
                if not copier.alive():
                    copier.kill()
                    copiers[n] = Copier(bootstrap, copier.transactional_id)
            time.sleep(0.1)
    finally:
        for copier in copiers:
            copier.kill()
    assert faults == []
    sink = consume(bootstrap, COPY_SINK, "read_committed", COPY_RECORDS)
    for partition in range(PARTITIONS):
        want = [b"%06d" % i for i in range(COPY_RECORDS) if i % PARTITIONS == partition]
        got = sink.get(partition, [])
        assert len(got) == len(want), (partition, len(got), len(want))
        assert got == want


if __name__ == "__main__":
    if sys.argv[1:2] == ["copier"]:
        copier_main(sys.argv[2], sys.argv[3])
