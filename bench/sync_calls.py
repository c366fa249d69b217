"""One blocking call's round trip: kafkette's sync clients against confluent-kafka (#30).

What an application that waits for each answer pays per call, on one ``kafkette serve
--memory`` child process: committing one offset synchronously (``Consumer.commit`` against
``commit(asynchronous=False)``), and sending one record and waiting for its acknowledgement
(kafkette's ``send_and_wait`` and ``send`` then ``flush``, against ``produce`` then
``flush``), each ``--calls`` times per round, the clients taking turns over ``--rounds``
alternating rounds. Every client runs with its defaults but ``linger.ms``, which is given
(5: Kafka 4's default and librdkafka's). The table gives, per call, the median over rounds
of the wall-clock time and of this process's CPU time (every thread: librdkafka's own too),
and the ratio of each to confluent-kafka's (lower is better).

    .venv/bin/python bench/sync_calls.py [--calls 2000] [--rounds 5] [--linger-ms 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import Consumer, OffsetAndMetadata, Producer, TopicPartition
from tests.brokers import BrokerProcess

Timing = tuple[float, float]
"""µs per call: wall clock, CPU of this process"""


def timed(calls: int, call: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


def kafkette_commit(bootstrap: str, topic: str, calls: int, linger_ms: int) -> Timing:
    with Consumer(
        bootstrap_servers=bootstrap, group_id=f"{topic}-k", enable_auto_commit=False
    ) as c:
        c.assign([TopicPartition(topic, 0)])
        offsets = {TopicPartition(topic, 0): OffsetAndMetadata(1, "")}
        c.commit(offsets)
        return timed(calls, lambda: c.commit(offsets))


def confluent_commit(bootstrap: str, topic: str, calls: int, linger_ms: int) -> Timing:
    c = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-c", "enable.auto.commit": False}
    )
    try:
        c.assign([ConfluentTopicPartition(topic, 0, 0)])
        offsets = [ConfluentTopicPartition(topic, 0, 1)]
        c.commit(offsets=offsets, asynchronous=False)
        return timed(calls, lambda: c.commit(offsets=offsets, asynchronous=False))
    finally:
        c.close()


def kafkette_send_and_wait(bootstrap: str, topic: str, calls: int, linger_ms: int) -> Timing:
    with Producer(bootstrap_servers=bootstrap, linger_ms=linger_ms) as p:
        p.send_and_wait(topic, b"warm-up")
        return timed(calls, lambda: p.send_and_wait(topic, b"v" * 100))


def kafkette_send_flush(bootstrap: str, topic: str, calls: int, linger_ms: int) -> Timing:
    with Producer(bootstrap_servers=bootstrap, linger_ms=linger_ms) as p:
        p.send_and_wait(topic, b"warm-up")

        def call() -> None:
            p.send(topic, b"v" * 100)
            p.flush()

        return timed(calls, call)


def confluent_produce_flush(bootstrap: str, topic: str, calls: int, linger_ms: int) -> Timing:
    p = ConfluentProducer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms})
    p.produce(topic, b"warm-up")
    p.flush(30)

    def call() -> None:
        p.produce(topic, b"v" * 100)
        p.flush(30)

    return timed(calls, call)


PEER = "confluent-kafka"
CASES: dict[str, dict[str, Callable[[str, str, int, int], Timing]]] = {
    "commit one offset": {"kafkette-sync": kafkette_commit, PEER: confluent_commit},
    "send one record, wait for its ack": {
        "kafkette send_and_wait": kafkette_send_and_wait,
        "kafkette send+flush": kafkette_send_flush,
        PEER: confluent_produce_flush,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--linger-ms", type=int, default=5)
    args = parser.parse_args()
    with BrokerProcess() as broker:
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            producer.send_and_wait("sync-calls", b"x", partition=0)
        for case, clients in CASES.items():
            runs: dict[str, list[Timing]] = {name: [] for name in clients}
            names = list(clients)
            for number in range(args.rounds):
                shift = number % len(names)
                for name in names[shift:] + names[:shift]:
                    topic = "sync-calls" if "commit" in case else f"sync-calls-{number}"
                    runs[name].append(
                        clients[name](broker.bootstrap, topic, args.calls, args.linger_ms)
                    )
            print(
                f"\n{case}: {args.calls:,} calls per round, {args.rounds} alternating rounds, "
                f"linger.ms {args.linger_ms}; µs per call, median"
            )
            print(f"{'client':<26}{'wall':>9}{'CPU':>9}{'x wall':>9}{'x CPU':>8}")
            peer_wall = statistics.median(w for w, _ in runs[PEER])
            peer_cpu = statistics.median(c for _, c in runs[PEER])
            for name, timings in runs.items():
                wall = statistics.median(w for w, _ in timings)
                cpu = statistics.median(c for _, c in timings)
                print(
                    f"{name:<26}{wall:>9.0f}{cpu:>9.0f}"
                    f"{wall / peer_wall:>8.2f}x{cpu / peer_cpu:>7.2f}x"
                )


if __name__ == "__main__":
    main()
