"""What one send costs the thread that calls it: kafkette's sync ``Producer.send`` against
confluent-kafka's ``Producer.produce``, for a record as the producer places it, one
given a partition, one given a delivery callback and one with two headers (#30).

One ``kafkette serve --memory``; each client sends ``--records`` 100 B records to a
one-partition topic of its own per round, in rounds that alternate between the clients,
and the calling thread's CPU time (``time.thread_time``) over the sends alone is divided
by the records: the producers' own threads (kafkette's event loop, librdkafka's) are
not counted, as what this measures is what the application's thread pays, which is
also how long it holds the interpreter lock. The producer is flushed between variants.
Equal settings: ``acks=1``, ``linger.ms`` 5, ``batch.size`` 16 KiB (librdkafka's
default is 1 MB), ``queue.buffering.max.messages`` 1,000,000.

    .venv/bin/python bench/send_cost.py [--records 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer as ConfluentProducer

from kafkette import AdminClient, NewTopic, Producer
from tests.brokers import BrokerProcess

VARIANTS = ("placed", "partition", "callback", "headers")
VALUE = b"v" * 100
HEADERS = [("trace-id", b"0123456789abcdef"), ("source", b"bench")]
_topics = itertools.count()


def _ignore(*_: object) -> None:
    pass


def kafkette_round(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """µs of the calling thread's CPU per send, by variant."""
    costs: dict[str, float] = {}
    with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=16_384) as producer:
        producer.send(topic, b"warm-up").result(30)
        producer.send(topic, b"warm-up").result(30)  # the partition count is cached
        for variant, call in _calls(producer.send, topic, "on_delivery").items():
            costs[variant] = _timed(call, records)
            producer.flush()
    return costs


def confluent_round(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    costs: dict[str, float] = {}
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 16_384,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    for variant, call in _calls(producer.produce, topic, "callback").items():
        costs[variant] = _timed(call, records)
        producer.flush(60)  # serves the callbacks too, outside the timed part
    return costs


def _calls(
    send: Callable[..., object], topic: str, callback_name: str
) -> dict[str, Callable[[], object]]:
    """One send of each variant, by name (``callback_name``: the client's keyword)."""
    given_callback: dict[str, Any] = {callback_name: _ignore}
    return {
        "placed": lambda: send(topic, VALUE),
        "partition": lambda: send(topic, VALUE, partition=0),
        "callback": lambda: send(topic, VALUE, **given_callback),
        "headers": lambda: send(topic, VALUE, headers=HEADERS),
    }


def _timed(call: Callable[[], object], records: int) -> float:
    started = time.thread_time()
    for _ in range(records):
        call()
    return (time.thread_time() - started) * 1e6 / records


CLIENTS: dict[str, Callable[[str, str, int], dict[str, float]]] = {
    "kafkette-sync": kafkette_round,
    "confluent-kafka": confluent_round,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {
        name: {v: [] for v in VARIANTS} for name in CLIENTS
    }
    with BrokerProcess() as broker:
        admin = AdminClient(bootstrap_servers=broker.bootstrap)
        try:
            for _ in range(args.rounds):
                for name, run in CLIENTS.items():
                    topic = f"send-cost-{next(_topics)}"
                    admin.create_topics([NewTopic(topic, 1)]).all()
                    for variant, cost in run(broker.bootstrap, topic, args.records).items():
                        results[name][variant].append(cost)
                    admin.delete_topics([topic]).all()
        finally:
            admin.close()
    print(
        f"\nthe calling thread's CPU per send, µs, {args.records:,} records of 100 B per "
        f"variant, {args.rounds} alternating rounds; median (best), and kafkette over "
        "confluent-kafka (lower is better)"
    )
    print(f"{'send':<12}" + "".join(f"{name:>22}" for name in CLIENTS) + f"{'x median':>10}")
    for variant in VARIANTS:
        cells, medians = [], []
        for name in CLIENTS:
            costs = results[name][variant]
            medians.append(statistics.median(costs))
            cells.append(f"{medians[-1]:>13.2f} ({min(costs):>5.2f})")
        print(
            f"{variant:<12}"
            + "".join(f"{c:>22}" for c in cells)
            + f"{medians[0] / medians[1]:>9.2f}x"
        )


if __name__ == "__main__":
    main()
