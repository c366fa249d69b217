"""A disk broker keeps answering while thousands of new partitions are created and get
their first records (#30).

A probe producer (confluent-kafka) sends one record every 50 ms to a topic of its
own and times each round trip, while another creates a topic of 2,000 partitions
on a ``kafkette serve --data-dir`` broker and writes one record to each. The
first write to a partition used to fsync its leader epoch checkpoint on the event
loop (a few ms each, seconds in all, the probe waiting), and creating a partition
fsynced its files on it too; the bound is loose for a loaded 2-core machine.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess

PARTITIONS = 2_000
PROBE_PERIOD_S = 0.01
TIMEOUT_S = 120.0


class Probe(threading.Thread):
    """One record every 10 ms; the round trip of each, in seconds."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        self.topic = topic
        self.round_trips: list[float] = []
        self.errors: list[KafkaError] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            done: list[float] = []

            def report(
                error: KafkaError | None, _message: Message, done: list[float] = done
            ) -> None:
                if error is not None:
                    self.errors.append(error)
                done.append(time.perf_counter())

            started = time.perf_counter()
            self.producer.produce(self.topic, b"probe", on_delivery=report)
            while not done and time.perf_counter() - started < TIMEOUT_S:
                self.producer.poll(0.001)
            self.round_trips.append((done[0] if done else time.perf_counter()) - started)
            time.sleep(max(PROBE_PERIOD_S - (time.perf_counter() - started), 0))


def test_a_probe_is_answered_while_new_partitions_get_their_first_records(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("probe", 1)])["probe"].result(TIMEOUT_S)
        probe = Probe(broker.bootstrap, "probe")
        probe.start()
        try:
            created = admin.create_topics([NewTopic("wide", PARTITIONS)], request_timeout=TIMEOUT_S)
            created["wide"].result(TIMEOUT_S)
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "linger.ms": 5,
                    "message.timeout.ms": int(TIMEOUT_S * 1000),
                }
            )
            assert len(producer.list_topics("wide", TIMEOUT_S).topics["wide"].partitions) == (
                PARTITIONS
            )
            offsets: dict[int, int] = {}

            def record(error: KafkaError | None, message: Message) -> None:
                assert error is None, error
                offsets[message.partition() or 0] = message.offset() or 0

            for partition in range(PARTITIONS):
                producer.produce("wide", b"v" * 200, partition=partition, on_delivery=record)
            assert producer.flush(TIMEOUT_S) == 0
        finally:
            probe.stopping.set()
            probe.join()
        assert offsets == dict.fromkeys(range(PARTITIONS), 0)
        assert probe.errors == []
        assert len(probe.round_trips) >= 10
        assert max(probe.round_trips) < 1.0, sorted(probe.round_trips)[-10:]
    finally:
        broker.kill()  # a clean stop would flush 2,000 logs: not what is tested here
        broker.close()
