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

Equal settings (#30): ``--equal`` runs instead the producer tables where
kafkette and confluent-kafka are given the same settings: *safe*
(``acks=all``, idempotent, 5 requests in flight) and *fast* (``acks=1``, not
idempotent, 1,000,000 in flight: librdkafka's default), each at ``batch.size``
16 KiB and 1 MiB, with 100 B and 1 KiB records (``linger.ms=5``, each client's
default ``buffer.memory``). kafkette sync, kafkette async and confluent-kafka
run alternately, ``--rounds`` times each, the order rotating from round to
round, each on a new one-partition topic deleted after its run (whose end
offset is checked first). Each table gives the median and best records/s, the
median records per CPU-second, and the ratios to confluent-kafka's median and
best; a summary of every cell's ratios closes the run:

    .venv/bin/python bench/clients.py --equal [--records 200000] [--rounds 5]
        [--cell fast,16384,100 ...]

``--cell`` (repeatable) runs only the cells named: ``safe`` or ``fast``, the batch size
and the record size, in bytes. ``--compression gzip|snappy|lz4|zstd`` gives every producer
that ``compression.type`` and sends a cycle of 1,000 distinct text-like values (gzip takes
them to about a quarter) instead of one repeated value, which would compress to almost
nothing. ``--partitions N`` gives each run's topic N partitions and every record one of
20,000 keys, which murmur2 spreads over them (confluent-kafka is given Java's partitioner,
``murmur2_random``, as kafkette's). ``--headers`` gives every record two headers (a 16-byte
trace id and a 5-byte source, as tracing or routing adds), the same for every client.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumer import CONSUMERS, bench_consumers, print_table
from kafkette import AdminClient, AsyncProducer, NewTopic, Producer, TopicPartition
from kafkette.admin import OffsetSpec
from tests.brokers import BrokerProcess

Timing = tuple[float, float]
"""wall-clock seconds, CPU seconds of this process (all its threads)"""
Keys = list[bytes] | None
"""each record's key (murmur2 picks its partition), or None: no keys"""
SIZES = {"100 B": 100, "1 KiB": 1024}
LINGER_MS = 5
_topic_numbers = itertools.count()


@dataclass(frozen=True)
class Settings:
    """What a producer is given; None: the client's own default."""

    acks: int = 1
    idempotence: bool | None = None
    max_in_flight: int | None = None
    batch_size: int | None = None
    compression: str | None = None
    partitions: int = 1
    """of each run's topic; past 1, every record has a key (a cycle of 20,000)"""
    headers: bool = False
    """whether every record carries :data:`HEADERS`"""

    def describe(self) -> str:
        acks = "all" if self.acks == -1 else str(self.acks)
        text = f"acks={acks}"
        if self.idempotence is not None:
            text += ", idempotent" if self.idempotence else ", not idempotent"
        if self.max_in_flight is not None:
            text += f", {self.max_in_flight:,} in flight"
        if self.batch_size is not None:
            text += f", batch.size {_bytes(self.batch_size)}"
        if self.compression is not None:
            text += f", {self.compression}"
        if self.partitions > 1:
            text += f", {self.partitions:,} partitions, keyed"
        if self.headers:
            text += ", 2 headers"
        return text


HEADERS = [("trace-id", b"0123456789abcdef"), ("source", b"bench")]
"""``--headers``: what every record carries (the same list object for every record)."""
DEFAULTS = Settings()
"""The first table's: ``acks=1``, everything else each client's default (``--batch-size``)."""
SAFE = Settings(acks=-1, idempotence=True, max_in_flight=5)
FAST = Settings(acks=1, idempotence=False, max_in_flight=1_000_000)
EQUAL_BATCH_SIZES = (16_384, 1 << 20)
EQUAL_CLIENTS = ("kafkette-sync", "kafkette-async", "confluent-kafka")


def payload(size: int, records: int, settings: Settings) -> list[bytes]:
    """The values a producer sends: one value repeated, or with compression a cycle of
    distinct text-like values (a repeated value would compress to almost nothing)."""
    if settings.compression is None:
        return [b"v" * size] * records
    rng = random.Random(size)
    words = ("order", "item", "user", "price", "status", "shipped", "pending", "eu-west", "us-east")
    pool = []
    for _ in range(1_000):
        text = ""
        while len(text) < size:
            text += f'"{rng.choice(words)}": {rng.randrange(10 ** rng.randint(1, 8))}, '
        pool.append(text[:size].encode())
    return [pool[i % len(pool)] for i in range(records)]


def record_keys(records: int, settings: Settings) -> Keys:
    """Each record's key when the topic has several partitions (murmur2 spreads a cycle of
    20,000 keys over them, in every client), else None."""
    if settings.partitions == 1:
        return None
    return [b"key-%d" % (i % 20_000) for i in range(records)]


def _bytes(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _kafkette_options(settings: Settings) -> dict[str, Any]:
    options: dict[str, Any] = {"acks": settings.acks, "linger_ms": LINGER_MS}
    if settings.idempotence is not None:
        options["enable_idempotence"] = settings.idempotence
    if settings.max_in_flight is not None:
        options["max_in_flight_requests_per_connection"] = settings.max_in_flight
    if settings.batch_size is not None:
        options["batch_size"] = settings.batch_size
    if settings.compression is not None:
        options["compression_type"] = settings.compression
    return options


def timed(run: Callable[[], None]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


# ---- producers: each sends `records` copies of `value` to `topic`, returns when all are acked


def kafkette_sync(
    bootstrap: str, topic: str, values: list[bytes], keys: Keys, settings: Settings = DEFAULTS
) -> Timing:
    with Producer(bootstrap_servers=bootstrap, **_kafkette_options(settings)) as producer:
        producer.send(topic, b"warm-up").result(30)

        def run() -> None:
            send = producer.send
            if settings.headers:
                for key, value in zip(keys or itertools.repeat(None), values, strict=False):
                    send(topic, value, key=key, headers=HEADERS)
            elif keys is None:
                for value in values:
                    send(topic, value)
            else:
                for key, value in zip(keys, values, strict=True):
                    send(topic, value, key=key)
            producer.flush()

        return timed(run)


def kafkette_async(
    bootstrap: str, topic: str, values: list[bytes], keys: Keys, settings: Settings = DEFAULTS
) -> Timing:
    async def main() -> Timing:
        async with AsyncProducer(bootstrap_servers=bootstrap, **_kafkette_options(settings)) as p:
            await (await p.send(topic, b"warm-up"))
            wall, cpu = time.perf_counter(), time.process_time()
            send = p.send
            if settings.headers:
                for key, value in zip(keys or itertools.repeat(None), values, strict=False):
                    await send(topic, value, key=key, headers=HEADERS)
            elif keys is None:
                for value in values:
                    await send(topic, value)
            else:
                for key, value in zip(keys, values, strict=True):
                    await send(topic, value, key=key)
            await p.flush()
            return time.perf_counter() - wall, time.process_time() - cpu

    return asyncio.run(main())


def confluent(
    bootstrap: str, topic: str, values: list[bytes], keys: Keys, settings: Settings = DEFAULTS
) -> Timing:
    from confluent_kafka import Producer as ConfluentProducer

    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": settings.acks,
        "linger.ms": LINGER_MS,
        "queue.buffering.max.messages": 1_000_000,
    }
    if settings.idempotence is not None:
        config["enable.idempotence"] = settings.idempotence
    if settings.max_in_flight is not None:
        config["max.in.flight.requests.per.connection"] = settings.max_in_flight
    if settings.batch_size is not None:
        config["batch.size"] = settings.batch_size
    if settings.compression is not None:
        config["compression.type"] = settings.compression
    if keys is not None:
        config["partitioner"] = "murmur2_random"  # Java's, as kafkette's (librdkafka: crc32)
    producer = ConfluentProducer(config)
    producer.produce(topic, b"warm-up")
    producer.flush(30)

    def run() -> None:
        produce = producer.produce
        if settings.headers:
            for key, value in zip(keys or itertools.repeat(None), values, strict=False):
                try:
                    produce(topic, value, key, headers=HEADERS)
                except BufferError:
                    producer.poll(0.01)
                    produce(topic, value, key, headers=HEADERS)
        elif keys is None:
            for value in values:
                try:
                    produce(topic, value)
                except BufferError:
                    producer.poll(0.01)
                    produce(topic, value)
        else:
            for key, value in zip(keys, values, strict=True):
                try:
                    produce(topic, value, key)
                except BufferError:
                    producer.poll(0.01)
                    produce(topic, value, key)
        producer.flush()

    return timed(run)


def aiokafka(
    bootstrap: str, topic: str, values: list[bytes], keys: Keys, settings: Settings = DEFAULTS
) -> Timing:
    from aiokafka import AIOKafkaProducer

    batch: dict[str, Any] = {}
    if settings.batch_size is not None:
        batch["max_batch_size"] = settings.batch_size
    if settings.compression is not None:
        batch["compression_type"] = settings.compression

    async def main() -> Timing:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks=settings.acks, linger_ms=LINGER_MS, **batch
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"warm-up")
            wall, cpu = time.perf_counter(), time.process_time()
            headers = HEADERS if settings.headers else None
            for key, value in zip(keys or itertools.repeat(None), values, strict=False):
                await producer.send(topic, value, key=key, headers=headers)
            await producer.flush()
            return time.perf_counter() - wall, time.process_time() - cpu
        finally:
            await producer.stop()

    return asyncio.run(main())


def kafka_python(
    bootstrap: str, topic: str, values: list[bytes], keys: Keys, settings: Settings = DEFAULTS
) -> Timing:
    from kafka import KafkaProducer

    batch: dict[str, Any] = {}
    if settings.batch_size is not None:
        batch["batch_size"] = settings.batch_size
    if settings.compression is not None:
        batch["compression_type"] = settings.compression
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=settings.acks, linger_ms=LINGER_MS, **batch
    )
    producer.send(topic, b"warm-up").get(30)

    def run() -> None:
        send = producer.send
        headers = HEADERS if settings.headers else None
        for key, value in zip(keys or itertools.repeat(None), values, strict=False):
            send(topic, value, key=key, headers=headers)
        producer.flush()

    try:
        return timed(run)
    finally:
        producer.close()


PRODUCERS: dict[str, Callable[[str, str, list[bytes], Keys, Settings], Timing]] = {
    "kafkette-sync": kafkette_sync,
    "kafkette-async": kafkette_async,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka,
    "kafka-python": kafka_python,
}


def bench_producers(
    bootstrap: str, records: int, repeat: int, only: list[str], settings: Settings = DEFAULTS
) -> None:
    names = [n for n in PRODUCERS if not only or n in only]
    for label, size in SIZES.items():
        values = payload(size, records, settings)
        keys = record_keys(records, settings)
        best: dict[str, Timing] = {}
        for _ in range(repeat):
            for name in names:
                topic = f"bench-{name}-{size}-{next(_topic_numbers)}"
                wall, cpu = PRODUCERS[name](bootstrap, topic, values, keys, settings)
                old = best.get(name)
                best[name] = (min(wall, old[0]), min(cpu, old[1])) if old else (wall, cpu)
        batch = (
            f"batch size {settings.batch_size}" if settings.batch_size else "default batch sizes"
        )
        title = (
            f"producer, {records} records of {label}, acks=1, one partition, {batch} "
            f"(best of {repeat})"
        )
        print_table(title, records, size, best)


# ---- equal settings (#30): kafkette and confluent-kafka given the same settings


@dataclass
class Cell:
    """One table of the equal-settings run: each client's (wall, CPU) seconds per round."""

    settings: Settings
    label: str
    runs: dict[str, list[Timing]]


def run_checked(
    admin: AdminClient,
    bootstrap: str,
    name: str,
    values: list[bytes],
    keys: Keys,
    settings: Settings,
) -> Timing:
    """One producer's run on a new topic, deleted after its end offsets are checked (the
    memory broker keeps every record: 120 runs would not fit otherwise)."""
    topic = f"bench-{name}-{len(values[0])}-{next(_topic_numbers)}"
    admin.create_topics([NewTopic(topic, settings.partitions)]).all()
    try:
        timing = PRODUCERS[name](bootstrap, topic, values, keys, settings)
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        ends = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST)).all()
        end = sum(ends[tp].offset for tp in tps)
        if end != len(values) + 1:  # and the warm-up record
            raise AssertionError(f"{name}: {topic} ends at {end}, expected {len(values) + 1}")
        return timing
    finally:
        admin.delete_topics([topic]).all()


def print_cell(cell: Cell, records: int) -> None:
    """Median and best records/s, median records per CPU-second, ratios to confluent-kafka."""
    print(f"\n{cell.settings.describe()}, {records:,} records of {cell.label}")
    print(
        f"{'client':<16}{'median/s':>12}{'best/s':>12}{'rec/CPU-s':>12}"
        f"{'x median':>10}{'x best':>9}{'x CPU':>8}"
    )
    peer = cell.runs["confluent-kafka"]
    peer_median = records / statistics.median(w for w, _ in peer)
    peer_best = records / min(w for w, _ in peer)
    peer_cpu = records / statistics.median(c for _, c in peer)
    for name, runs in cell.runs.items():
        median = records / statistics.median(w for w, _ in runs)
        best = records / min(w for w, _ in runs)
        cpu = records / statistics.median(c for _, c in runs)
        print(
            f"{name:<16}{median:>12,.0f}{best:>12,.0f}{cpu:>12,.0f}"
            f"{median / peer_median:>9.2f}x{best / peer_best:>8.2f}x{cpu / peer_cpu:>7.2f}x"
        )


def print_summary(cells: list[Cell], records: int) -> None:
    """Every cell's ratios to confluent-kafka: median (best), per kafkette client."""
    ours = [n for n in cells[0].runs if n != "confluent-kafka"] if cells else []
    print(f"\nsummary: kafkette / confluent-kafka records/s, median (best), {records:,} records")
    labels = [f"{cell.settings.describe()}, {cell.label}" for cell in cells]
    width = max(map(len, labels), default=0) + 2
    print(f"{'settings':<{width}}" + "".join(f"{n:>18}" for n in ours))
    for cell, label in zip(cells, labels, strict=True):
        peer = cell.runs["confluent-kafka"]
        line = f"{label:<{width}}"
        for name in ours:
            runs = cell.runs[name]
            median = statistics.median(w for w, _ in peer) / statistics.median(w for w, _ in runs)
            best = min(w for w, _ in peer) / min(w for w, _ in runs)
            line += f"{f'{median:.2f}x ({best:.2f}x)':>18}"
        print(line, flush=True)


EQUAL_BASES = {"safe": SAFE, "fast": FAST}


def parse_cell(text: str) -> tuple[str, int, int]:
    """``--cell``'s ``safe|fast,BATCH_SIZE,RECORD_SIZE`` (in bytes), e.g. ``fast,16384,100``."""
    try:
        base, batch_size, size = text.split(",")
        cell = (base, int(batch_size), int(size))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected safe|fast,BATCH_SIZE,RECORD_SIZE: {text!r}"
        ) from None
    if base not in EQUAL_BASES or cell[1] not in EQUAL_BATCH_SIZES or cell[2] not in SIZES.values():
        raise argparse.ArgumentTypeError(
            f"one of safe|fast, batch sizes {EQUAL_BATCH_SIZES}, record sizes "
            f"{tuple(SIZES.values())}: {text!r}"
        )
    return cell


def bench_equal(
    bootstrap: str,
    records: int,
    rounds: int,
    only: list[str],
    cells_wanted: list[tuple[str, int, int]] | None = None,
    compression: str | None = None,
    partitions: int = 1,
    headers: bool = False,
) -> None:
    """The safe and fast tables, each at both batch sizes and both record sizes (``only``:
    those of our clients, beside confluent-kafka, the peer every ratio is to;
    ``cells_wanted``: only those cells, as :func:`parse_cell` reads them; ``compression``:
    every producer's ``compression.type``; ``partitions``: of each run's topic, keyed;
    ``headers``: every record with :data:`HEADERS`)."""
    clients = [n for n in EQUAL_CLIENTS if not only or n in only or n == "confluent-kafka"]
    cells: list[Cell] = []
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        for kind, base in EQUAL_BASES.items():
            for batch_size in EQUAL_BATCH_SIZES:
                settings = replace(
                    base,
                    batch_size=batch_size,
                    compression=compression,
                    partitions=partitions,
                    headers=headers,
                )
                for label, size in SIZES.items():
                    if cells_wanted and (kind, batch_size, size) not in cells_wanted:
                        continue
                    values = payload(size, records, settings)
                    keys = record_keys(records, settings)
                    cell = Cell(settings, label, {name: [] for name in clients})
                    for number in range(rounds):
                        shift = number % len(clients)
                        for name in clients[shift:] + clients[:shift]:
                            timing = run_checked(admin, bootstrap, name, values, keys, settings)
                            cell.runs[name].append(timing)
                    print_cell(cell, records)
                    cells.append(cell)
    print_summary(cells, records)


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
    half.add_argument(
        "--equal", action="store_true", help="the equal-settings producer tables only (#30)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --equal")
    parser.add_argument(
        "--cell",
        type=parse_cell,
        action="append",
        default=[],
        help="with --equal, only this cell: safe|fast,BATCH_SIZE,RECORD_SIZE (e.g. fast,16384,100)",
    )
    parser.add_argument(
        "--compression",
        choices=("gzip", "snappy", "lz4", "zstd"),
        help="every producer's compression.type, with distinct text-like values (default: none)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of each run's topic; past 1 every record has a key (default: 1)",
    )
    parser.add_argument(
        "--headers",
        action="store_true",
        help="every record with two headers (a trace id and a source; default: none)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="one batch size for every client (default: each its own: 16 KiB, librdkafka 1 MB)",
    )
    args = parser.parse_args()
    settings = replace(
        DEFAULTS,
        batch_size=args.batch_size,
        compression=args.compression,
        partitions=args.partitions,
        headers=args.headers,
    )
    with BrokerProcess() as broker:
        if args.equal:
            bench_equal(
                broker.bootstrap,
                args.records,
                args.rounds,
                args.only,
                args.cell,
                args.compression,
                args.partitions,
                args.headers,
            )
            return
        if not args.consumers:
            bench_producers(broker.bootstrap, args.records, args.repeat, args.only, settings)
        if not args.producers:
            bench_consumers(broker.bootstrap, args.records, args.repeat, args.only)


if __name__ == "__main__":
    main()
