"""Consumer throughput: kafkette (sync and async) against confluent-kafka, aiokafka, kafka-python.

One ``kafkette serve --memory`` child process, filled once by confluent-kafka
(librdkafka) with two one-partition topics: 100-byte values and 1 KiB values
(10-byte keys, no compression, batches of up to 1 MiB). Each consumer is
assigned partition 0 from offset 0 and runs until it has seen every record,
touching each record's value (so lazy parsing cannot cheat). Consumers run
in rounds, one after another, and the best of ``--repeat`` rounds is kept for
each, so all see the same machine load. Figures are wall-clock records/s and
MB/s of values (the broker runs in its own process on the same 2 cores), and
records per CPU-second of the consumer's process (all its threads, librdkafka's
included), the steadier figure on a shared machine.
Target: kafkette >= 1.0x aiokafka. ``bench/clients.py`` runs this half after
its producers, against the same broker; alone:

    .venv/bin/python bench/consumer.py [--records 200000] [--repeat 3] [--only kafkette-sync]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import AsyncConsumer, Consumer, TopicPartition
from tests.brokers import BrokerProcess

TIMEOUT_S = 300.0
Timing = tuple[float, float]
"""wall-clock seconds, CPU seconds of this process (all its threads)"""
SIZES = {"100 B": 100, "1 KiB": 1024}


def fill(bootstrap: str, topic: str, records: int, value_size: int) -> None:
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "acks": 1,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * value_size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"key-%06d" % (i % 1_000_000), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def check(count: int, size: int, records: int, value_size: int) -> None:
    if count != records or size != records * value_size:
        raise AssertionError(f"read {count} records / {size} bytes, expected {records}")


def deadline_passed(start: float) -> bool:
    return time.perf_counter() - start > TIMEOUT_S


def kafkette_sync(bootstrap: str, topic: str, records: int, value_size: int) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    count = size = 0
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        while count < records and not deadline_passed(start):
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
                for record in batch:
                    size += len(record.value)
        elapsed = time.perf_counter() - start, time.process_time() - cpu
    check(count, size, records, value_size)
    return elapsed


def kafkette_async(bootstrap: str, topic: str, records: int, value_size: int) -> Timing:
    async def run() -> Timing:
        start, cpu = time.perf_counter(), time.process_time()
        count = size = 0
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            while count < records and not deadline_passed(start):
                for batch in (await c.poll(timeout_ms=1000)).values():
                    count += len(batch)
                    for record in batch:
                        size += len(record.value)
            elapsed = time.perf_counter() - start, time.process_time() - cpu
        check(count, size, records, value_size)
        return elapsed

    return asyncio.run(run())


def confluent(bootstrap: str, topic: str, records: int, value_size: int) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
    count = size = 0
    while count < records and not deadline_passed(start):
        for message in consumer.consume(num_messages=1000, timeout=1.0):
            if message.error():
                raise RuntimeError(message.error())
            count += 1
            size += len(message.value())
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    consumer.close()
    check(count, size, records, value_size)
    return elapsed


def aiokafka(bootstrap: str, topic: str, records: int, value_size: int) -> Timing:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run() -> Timing:
        start, cpu = time.perf_counter(), time.process_time()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        count = size = 0
        try:
            while count < records and not deadline_passed(start):
                for batch in (await consumer.getmany(timeout_ms=1000)).values():
                    count += len(batch)
                    for record in batch:
                        size += len(record.value)
            elapsed = time.perf_counter() - start, time.process_time() - cpu
        finally:
            await consumer.stop()
        check(count, size, records, value_size)
        return elapsed

    return asyncio.run(run())


def kafka_python(bootstrap: str, topic: str, records: int, value_size: int) -> Timing:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    start, cpu = time.perf_counter(), time.process_time()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    consumer.assign([KpTopicPartition(topic, 0)])
    count = size = 0
    while count < records and not deadline_passed(start):
        for batch in consumer.poll(timeout_ms=1000).values():
            count += len(batch)
            for record in batch:
                size += len(record.value)
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    consumer.close()
    check(count, size, records, value_size)
    return elapsed


CONSUMERS: dict[str, Callable[[str, str, int, int], Timing]] = {
    "kafkette-sync": kafkette_sync,
    "kafkette-async": kafkette_async,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka,
    "kafka-python": kafka_python,
}


def print_table(title: str, records: int, value_size: int, best: dict[str, Timing]) -> None:
    """One table: records/s, MB/s of values, records per CPU-second and the ratios to
    confluent-kafka and aiokafka, from each client's best (wall, CPU) seconds."""
    print(f"\n{title}")
    print(
        f"{'client':<16}{'records/s':>12}{'MB/s':>9}{'rec/CPU-s':>12}"
        f"{'x confluent':>13}{'x aiokafka':>12}"
    )
    rate = {name: records / wall for name, (wall, _) in best.items()}
    for name, (_wall, cpu) in best.items():
        ratios = ""
        for peer in ("confluent-kafka", "aiokafka"):
            ratios += f"{rate[name] / rate[peer]:>12.2f}x" if peer in rate else f"{'-':>13}"
        print(
            f"{name:<16}{rate[name]:>12,.0f}{rate[name] * value_size / 1e6:>9.1f}"
            f"{records / cpu:>12,.0f}{ratios}"
        )


def bench_consumers(bootstrap: str, records_100b: int, repeat: int, only: list[str]) -> None:
    """Fill the topics, run every consumer ``repeat`` times and print the best of each."""
    names = [n for n in CONSUMERS if not only or n in only]
    counts = {"100 B": records_100b, "1 KiB": max(records_100b // 4, 1)}
    for label, value_size in SIZES.items():
        topic = f"bench-consume-{value_size}"
        records = counts[label]
        fill(bootstrap, topic, records, value_size)
        best: dict[str, Timing] = {}
        for _ in range(repeat):
            for name in names:
                wall, cpu = CONSUMERS[name](bootstrap, topic, records, value_size)
                old = best.get(name)
                best[name] = (min(wall, old[0]), min(cpu, old[1])) if old else (wall, cpu)
        title = f"consumer, {records} records of {label}, one partition (best of {repeat})"
        print_table(title, records, value_size, best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records of 100 B")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", default=[], choices=list(CONSUMERS))
    args = parser.parse_args()
    with BrokerProcess() as broker:
        bench_consumers(broker.bootstrap, args.records, args.repeat, args.only)


if __name__ == "__main__":
    main()
