"""Client throughput: kafkette (sync and async) against confluent-kafka, aiokafka, kafka-python.

Producers, then consumers, against one ``kafkette serve --memory`` child
process. Producers: each
sends ``--records`` values of 100 bytes, then of 1 KiB (no key, no
compression, ``acks=1``, ``linger.ms=5``, each client's default batch size:
16 KiB, but 1 MB for librdkafka; ``--batch-size`` sets one for all)
to its own one-partition topic, and the clock stops when every record is
acknowledged (``flush``). Producers run in rounds, one after another, and the
best of ``--repeat`` rounds is kept for each, so all see the same machine
load. Figures: wall-clock records/s and MB/s of values (the broker runs in its
own process on the same 2 cores), records per CPU-second of the producer's
process (all its threads, librdkafka's included), and the ratio of each
kafkette figure to confluent-kafka's and aiokafka's.
Targets: kafkette >= 3x aiokafka and >= 0.5x confluent-kafka.

Consumers: ``bench/consumer.py`` (its docstring says how), 200,000 records of
100 B and 50,000 of 1 KiB. Target: kafkette >= 1x aiokafka.

    .venv/bin/python bench/clients.py [--records 200000] [--repeat 3] [--only kafkette-sync]
        [--batch-size 16384] [--producers | --consumers]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumer import CONSUMERS, bench_consumers, print_table
from kafkette import AsyncProducer, Producer
from tests.brokers import BrokerProcess

Timing = tuple[float, float]
"""wall-clock seconds, CPU seconds of this process (all its threads)"""
SIZES = {"100 B": 100, "1 KiB": 1024}
LINGER_MS = 5
_topic_numbers = itertools.count()


def _batch(name: str) -> dict[str, int]:
    return {name: BATCH["size"]} if BATCH else {}


def timed(run: Callable[[], None]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


# ---- producers: each sends `records` copies of `value` to `topic`, returns when all are acked


BATCH: dict[str, int] = {}
"""``--batch-size`` given: the one batch size every client uses (each client's default if not)."""


def kafkette_sync(bootstrap: str, topic: str, value: bytes, records: int) -> Timing:
    with Producer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, **_batch("batch_size")
    ) as producer:
        producer.send(topic, b"warm-up").result(30)

        def run() -> None:
            send = producer.send
            for _ in range(records):
                send(topic, value)
            producer.flush()

        return timed(run)


def kafkette_async(bootstrap: str, topic: str, value: bytes, records: int) -> Timing:
    async def main() -> Timing:
        async with AsyncProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, **_batch("batch_size")
        ) as p:
            await (await p.send(topic, b"warm-up"))
            wall, cpu = time.perf_counter(), time.process_time()
            send = p.send
            for _ in range(records):
                await send(topic, value)
            await p.flush()
            return time.perf_counter() - wall, time.process_time() - cpu

    return asyncio.run(main())


def confluent(bootstrap: str, topic: str, value: bytes, records: int) -> Timing:
    from confluent_kafka import Producer as ConfluentProducer

    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": LINGER_MS,
            "queue.buffering.max.messages": 1_000_000,
            **_batch("batch.size"),
        }
    )
    producer.produce(topic, b"warm-up")
    producer.flush(30)

    def run() -> None:
        produce = producer.produce
        for _ in range(records):
            try:
                produce(topic, value)
            except BufferError:
                producer.poll(0.01)
                produce(topic, value)
        producer.flush()

    return timed(run)


def aiokafka(bootstrap: str, topic: str, value: bytes, records: int) -> Timing:
    from aiokafka import AIOKafkaProducer

    async def main() -> Timing:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, **_batch("max_batch_size")
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"warm-up")
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(records):
                await producer.send(topic, value)
            await producer.flush()
            return time.perf_counter() - wall, time.process_time() - cpu
        finally:
            await producer.stop()

    return asyncio.run(main())


def kafka_python(bootstrap: str, topic: str, value: bytes, records: int) -> Timing:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, **_batch("batch_size")
    )
    producer.send(topic, b"warm-up").get(30)

    def run() -> None:
        send = producer.send
        for _ in range(records):
            send(topic, value)
        producer.flush()

    try:
        return timed(run)
    finally:
        producer.close()


PRODUCERS: dict[str, Callable[[str, str, bytes, int], Timing]] = {
    "kafkette-sync": kafkette_sync,
    "kafkette-async": kafkette_async,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka,
    "kafka-python": kafka_python,
}


def bench_producers(bootstrap: str, records: int, repeat: int, only: list[str]) -> None:
    names = [n for n in PRODUCERS if not only or n in only]
    for label, size in SIZES.items():
        value = b"v" * size
        best: dict[str, Timing] = {}
        for _ in range(repeat):
            for name in names:
                topic = f"bench-{name}-{size}-{next(_topic_numbers)}"
                wall, cpu = PRODUCERS[name](bootstrap, topic, value, records)
                old = best.get(name)
                best[name] = (min(wall, old[0]), min(cpu, old[1])) if old else (wall, cpu)
        batch = f"batch size {BATCH['size']}" if BATCH else "default batch sizes"
        title = (
            f"producer, {records} records of {label}, acks=1, one partition, {batch} "
            f"(best of {repeat})"
        )
        print_table(title, records, size, best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only", action="append", default=[], choices=sorted({*PRODUCERS, *CONSUMERS})
    )
    half = parser.add_mutually_exclusive_group()
    half.add_argument("--producers", action="store_true", help="producers only")
    half.add_argument("--consumers", action="store_true", help="consumers only")
    parser.add_argument(
        "--batch-size",
        type=int,
        help="one batch size for every client (default: each its own: 16 KiB, librdkafka 1 MB)",
    )
    args = parser.parse_args()
    if args.batch_size:
        BATCH["size"] = args.batch_size
    with BrokerProcess() as broker:
        if not args.consumers:
            bench_producers(broker.bootstrap, args.records, args.repeat, args.only)
        if not args.producers:
            bench_consumers(broker.bootstrap, args.records, args.repeat, args.only)


if __name__ == "__main__":
    main()
