"""Consumer throughput: kafkette, sync and async, against confluent-kafka (and others).

One ``kafkette serve --memory`` child process, filled once by confluent-kafka
(librdkafka) with two one-partition topics: 100-byte values and 1 KiB values
(10-byte keys, no compression), once in batches of up to 1 MiB (librdkafka's
``batch.size``) and once of up to 16 KiB (Kafka's and kafkette's). Each consumer is
assigned partition 0 from offset 0 and runs until it has seen every record,
touching each record's value (so lazy parsing cannot cheat); the time counts
from the consumer's construction. Consumers run in alternating rounds (each
round one run of each, the order rotating), so all see the same machine load;
the table gives the median and the best round's records/s, the median records
per CPU-second of the consumer's process (all its threads, librdkafka's
included: the steadier figure on a loaded machine) and the ratios to
confluent-kafka (#30's target: 1.0x or more, median and best). Equal settings:
confluent-kafka checks CRCs as kafkette does (``check.crcs``, Kafka's default; librdkafka's
is off), which cost it no measurable rate here; and it waits 10 ms, not librdkafka's
default 1 s, before fetching again once its queue holds ``queued.min.messages``
(``fetch.queue.backoff.ms``: at the default it read 100 B records at 150-220k/s instead of
1.6-1.8M/s here, an idle wait kafkette's consumer, as Kafka's, does not have). The broker runs
in its own process on the same cores. ``bench/clients.py`` runs this half after
its producers, against the same broker; alone:

    .venv/bin/python bench/consumer.py [--records 500000] [--repeat 5] [--only kafkette-sync]
        [--batches "16 KiB"] [--partitions 1000]

``--records`` is the count of 100 B records; the 1 KiB topic holds 2/5 as many.
``--partitions N`` gives each topic N partitions, filled with keyed records (1,000,000 keys,
Java's murmur2 partitioner), and every consumer is assigned all of them: what a consumer
pays per partition and per small batch (at 1,000 partitions and 16 KiB batches, 500 records
of 100 B make about 4 batches of 125 records per partition).
By default kafkette-sync, kafkette-async and confluent-kafka run; ``--only``
picks (aiokafka and kafka-python too).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import AdminClient, AsyncConsumer, Consumer, NewTopic, TopicPartition
from tests.brokers import BrokerProcess

TIMEOUT_S = 300.0
Timing = tuple[float, float]
"""wall-clock seconds, CPU seconds of this process (all its threads)"""
SIZES = {"100 B": 100, "1 KiB": 1024}


def fill(
    bootstrap: str,
    topic: str,
    records: int,
    value_size: int,
    batch_size: int = 1 << 20,
    partitions: int = 1,
) -> None:
    """Write ``records`` values of ``value_size`` bytes to ``topic`` (created with
    ``partitions`` partitions), to partition 0 or, past one partition, where murmur2 puts
    each record's key."""
    if partitions > 1:
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(topic, partitions, 1)])
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": batch_size,
            "acks": 1,
            "queue.buffering.max.messages": 1_000_000,
            "partitioner": "murmur2_random",  # Java's (librdkafka's default is crc32)
        }
    )
    value = b"v" * value_size
    chosen = {"partition": 0} if partitions == 1 else {}
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"key-%06d" % (i % 1_000_000), **chosen)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def check(count: int, size: int, records: int, value_size: int) -> None:
    if count != records or size != records * value_size:
        raise AssertionError(f"read {count} records / {size} bytes, expected {records}")


def deadline_passed(start: float) -> bool:
    return time.perf_counter() - start > TIMEOUT_S


def kafkette_sync(
    bootstrap: str, topic: str, records: int, value_size: int, partitions: int = 1
) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    count = size = 0
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        while count < records and not deadline_passed(start):
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
                for record in batch:
                    size += len(record.value)
        elapsed = time.perf_counter() - start, time.process_time() - cpu
    check(count, size, records, value_size)
    return elapsed


def kafkette_async(
    bootstrap: str, topic: str, records: int, value_size: int, partitions: int = 1
) -> Timing:
    async def run() -> Timing:
        start, cpu = time.perf_counter(), time.process_time()
        count = size = 0
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            while count < records and not deadline_passed(start):
                for batch in (await c.poll(timeout_ms=1000)).values():
                    count += len(batch)
                    for record in batch:
                        size += len(record.value)
            elapsed = time.perf_counter() - start, time.process_time() - cpu
        check(count, size, records, value_size)
        return elapsed

    return asyncio.run(run())


def confluent(
    bootstrap: str, topic: str, records: int, value_size: int, partitions: int = 1
) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "check.crcs": True,  # kafkette's and Kafka's default; librdkafka's is false
            # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) once its queue holds
            # queued.min.messages (100,000); kafkette (and Kafka's consumer) never idle so
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
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


def aiokafka(
    bootstrap: str, topic: str, records: int, value_size: int, partitions: int = 1
) -> Timing:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run() -> Timing:
        start, cpu = time.perf_counter(), time.process_time()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        consumer.assign([AioTopicPartition(topic, p) for p in range(partitions)])
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


def kafka_python(
    bootstrap: str, topic: str, records: int, value_size: int, partitions: int = 1
) -> Timing:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    start, cpu = time.perf_counter(), time.process_time()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    consumer.assign([KpTopicPartition(topic, p) for p in range(partitions)])
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


CONSUMERS: dict[str, Callable[[str, str, int, int, int], Timing]] = {
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


DEFAULT_CONSUMERS = ("kafkette-sync", "kafkette-async", "confluent-kafka")
PEER = "confluent-kafka"


def print_runs(title: str, records: int, runs: dict[str, list[Timing]]) -> None:
    """Median and best records/s, median records per CPU-second, and the ratios of
    each to confluent-kafka's (same rounds)."""
    print(f"\n{title}")
    print(
        f"{'client':<16}{'median/s':>12}{'best/s':>12}{'rec/CPU-s':>12}"
        f"{'x median':>10}{'x best':>9}{'x CPU':>8}"
    )
    figures = {
        name: (
            records / statistics.median(w for w, _ in timings),
            records / min(w for w, _ in timings),
            records / statistics.median(c for _, c in timings),
        )
        for name, timings in runs.items()
    }
    peer = figures.get(PEER)
    for name, (median, best, per_cpu) in figures.items():
        ratios = (
            f"{median / peer[0]:>9.2f}x{best / peer[1]:>8.2f}x{per_cpu / peer[2]:>7.2f}x"
            if peer is not None
            else ""
        )
        print(f"{name:<16}{median:>12,.0f}{best:>12,.0f}{per_cpu:>12,.0f}{ratios}")


BATCH_SIZES = {"1 MiB": 1 << 20, "16 KiB": 16 * 1024}
"""The producer's batch.size when filling: librdkafka's default (about 1,000 records of
1 KiB per batch), and Kafka's and kafkette's (about 15): what a consumer pays per batch."""


def bench_consumers(
    bootstrap: str,
    records_100b: int,
    repeat: int,
    only: list[str],
    batch_sizes: Sequence[str] = tuple(BATCH_SIZES),
    partitions: int = 1,
) -> None:
    """Fill the topics, run the consumers in ``repeat`` alternating rounds and print the
    median and best of each beside confluent-kafka's."""
    for batches in batch_sizes:
        _bench_batches(bootstrap, records_100b, repeat, only, batches, partitions)


def _bench_batches(
    bootstrap: str,
    records_100b: int,
    repeat: int,
    only: list[str],
    batches: str,
    partitions: int,
) -> None:
    names = [n for n in CONSUMERS if n in (only or DEFAULT_CONSUMERS)]
    counts = {"100 B": records_100b, "1 KiB": max(records_100b * 2 // 5, 1)}
    for label, value_size in SIZES.items():
        topic = f"bench-consume-{value_size}-{BATCH_SIZES[batches]}-{partitions}"
        records = counts[label]
        fill(bootstrap, topic, records, value_size, BATCH_SIZES[batches], partitions)
        runs: dict[str, list[Timing]] = {name: [] for name in names}
        for round_number in range(repeat):
            turn = round_number % len(names)
            for name in names[turn:] + names[:turn]:
                runs[name].append(
                    CONSUMERS[name](bootstrap, topic, records, value_size, partitions)
                )
        spread = "one partition" if partitions == 1 else f"{partitions:,} partitions, keyed"
        title = (
            f"consumer, {records:,} records of {label} in batches of up to {batches}, "
            f"{spread}, {repeat} alternating rounds"
        )
        print_runs(title, records, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000, help="records of 100 B")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", action="append", default=[], choices=list(CONSUMERS))
    parser.add_argument(
        "--batches",
        action="append",
        default=[],
        choices=list(BATCH_SIZES),
        help="the producer's batch.size when filling (default: each)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of each topic; past 1 the records are keyed (default: 1)",
    )
    args = parser.parse_args()
    if args.partitions < 1:
        parser.error("--partitions must be at least 1")
    with BrokerProcess() as broker:
        bench_consumers(
            broker.bootstrap,
            args.records,
            args.repeat,
            args.only,
            args.batches or BATCH_SIZES,
            args.partitions,
        )


if __name__ == "__main__":
    main()
