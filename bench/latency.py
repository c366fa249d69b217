"""End-to-end latency at fixed rates: kafkette (sync and async) against confluent-kafka and
aiokafka, on one broker (#30).

One ``kafkette serve --memory`` child process (``--disk``: ``--data-dir`` in a scratch
directory). Each run pairs one client's producer and consumer in this process on a new
one-partition topic: the consumer is assigned the partition first, then the producer sends
``--size`` (100) byte records at a fixed rate for ``--seconds``; each record carries the
monotonic clock's reading (``perf_counter_ns``) taken just before its send call and its
sequence number, and the consumer reads the clock again when a poll hands the record over.
The latency is the difference: produce call to consumer's hand-over, the broker's round
trips, linger and fetch waits included. The first ``--warmup`` seconds' records are left out;
every record must arrive exactly once (checked by sequence number).

Pacing is not a busy loop (the consumer and the broker share 2 cores with it): the producer
wakes at most every millisecond and sends every record due by then, each stamped at its own
send. Sync clients pace in a thread of their own beside the consumer's loop; async clients in
a task on the consumer's event loop. The achieved rate is printed: a client that cannot keep
up falls behind its schedule, and its latencies say so.

Equal settings (where the clients' defaults differ): ``acks=all`` and idempotence on (Kafka's
producer defaults; aiokafka's are acks=1 and off, librdkafka's idempotence off),
``linger.ms`` 5 (``--linger-ms``; Kafka 4's and librdkafka's default, aiokafka's is 0),
``batch.size`` 16 KiB (Kafka's; librdkafka's default is 1 MB), ``fetch.min.bytes`` 1 and
``fetch.max.wait.ms`` 500 (librdkafka's ``fetch.wait.max.ms``; every client's default).

Clients run in alternating rounds, the order rotating per round, at each rate. The table
gives per client the median over rounds of each percentile (p50, p99, p99.9) and the best
round's, with the ratio of each median to confluent-kafka's (lower is better: 1.0x or less is
#30's target for p99), and the CPU time this process spent per record while the records were
sent (every thread: the pacing, polling and loop threads, librdkafka's own), which other work
on the machine distorts less than the latencies. ``--plot PATH`` draws the medians as a PNG.

``--mixed`` adds two crossed pairs, kafkette's sync producer with confluent-kafka's consumer
(``kafkette-p/ck-c``) and the reverse (``ck-p/kafkette-c``), to tell which side of a pair
its latency comes from (the broker is the same for every pair).

    .venv/bin/python bench/latency.py [--rates 1000,50000] [--seconds 5] [--rounds 3]
        [--disk] [--linger-ms 5] [--only kafkette-sync] [--mixed]
        [--plot docs/images/latency.png]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import (
    AdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from tests.brokers import BrokerProcess

STAMP = struct.Struct(">qq")
"""a record's value starts with the send's clock reading (ns) and its sequence number"""
READY = -1
"""the sequence number of the record sent before the paced ones, to know the pair is ready"""
TICK_S = 0.001
LATENCY_TICKS_MS = (1, 2, 3, 5, 7, 10, 20, 30, 50, 70, 100, 200, 300, 500, 1000, 2000, 5000)
DRAIN_TIMEOUT_S = 60.0
PERCENTILES = (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))
CLIENTS = ("kafkette-sync", "kafkette-async", "confluent-kafka", "aiokafka")
PEER = "confluent-kafka"
_topic_numbers = itertools.count()


@dataclass(frozen=True)
class Plan:
    """What one run sends: ``rate`` records/s of ``size`` bytes for ``seconds``, the first
    ``warmup`` seconds' records left out of the figures."""

    rate: int
    seconds: float
    warmup: float
    size: int
    linger_ms: int

    @property
    def total(self) -> int:
        return int(self.rate * self.seconds)

    @property
    def skipped(self) -> int:
        return int(self.rate * self.warmup)

    def value(self, sequence: int) -> bytes:
        stamp = STAMP.pack(time.perf_counter_ns(), sequence)
        return stamp + b"v" * (self.size - len(stamp))


@dataclass
class Run:
    """One client's run: latencies (ns) of the measured records, the achieved send rate and
    this process's CPU time per record while sending (every thread's: ours, librdkafka's)."""

    latencies: list[int]
    rate: float
    cpu_us: float

    def percentile(self, fraction: float) -> float:
        """The latency (ms) that ``fraction`` of the records did not exceed."""
        ordered = self.latencies
        index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
        return ordered[index] / 1e6


class Receiver:
    """The consumer's side of a run: latencies by sequence number, exactly once each."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.latencies: list[int] = []
        self.seen = bytearray(plan.total)
        self.count = 0
        self.ready = False

    def take(self, values: list[bytes]) -> None:
        now = time.perf_counter_ns()
        for value in values:
            sent, sequence = STAMP.unpack_from(value)
            if sequence == READY:
                self.ready = True
                continue
            if self.seen[sequence]:
                raise AssertionError(f"record {sequence} delivered twice")
            self.seen[sequence] = 1
            self.count += 1
            if sequence >= self.plan.skipped:
                self.latencies.append(now - sent)

    @property
    def done(self) -> bool:
        return self.count == self.plan.total

    def result(self, rate: float, cpu_s: float) -> Run:
        if not self.done:
            missing = self.plan.total - self.count
            raise AssertionError(f"{missing} of {self.plan.total} records never arrived")
        self.latencies.sort()
        return Run(self.latencies, rate, cpu_s * 1e6 / self.plan.total)


def paced_sync(plan: Plan, send: Callable[[bytes], None], tick: Callable[[], None]) -> float:
    """Send ``plan.total`` records on schedule from this thread; the achieved rate."""
    start = time.perf_counter()
    sent = 0
    while sent < plan.total:
        now = time.perf_counter()
        due = min(plan.total, int((now - start) * plan.rate) + 1)
        for sequence in range(sent, due):
            send(plan.value(sequence))
        sent = due
        tick()
        time.sleep(max(start + sent / plan.rate - time.perf_counter(), TICK_S))
    return plan.total / (time.perf_counter() - start)


async def paced_async(plan: Plan, send: Callable[[bytes], Awaitable[object]]) -> float:
    """``paced_sync`` as a task: sleeps on the event loop between bursts."""
    start = time.perf_counter()
    sent = 0
    while sent < plan.total:
        now = time.perf_counter()
        due = min(plan.total, int((now - start) * plan.rate) + 1)
        for sequence in range(sent, due):
            await send(plan.value(sequence))
        sent = due
        await asyncio.sleep(max(start + sent / plan.rate - time.perf_counter(), TICK_S))
    return plan.total / (time.perf_counter() - start)


def run_sync(
    plan: Plan,
    send: Callable[[bytes], None],
    flush: Callable[[], None],
    tick: Callable[[], None],
    poll: Callable[[], list[bytes]],
) -> Run:
    """A sync pair: the consumer polls in this thread, the producer paces in another."""
    receiver = Receiver(plan)
    send(plan.value(READY))
    flush()
    deadline = time.perf_counter() + DRAIN_TIMEOUT_S
    while not receiver.ready and time.perf_counter() < deadline:
        receiver.take(poll())
    rates: list[float] = []
    pacer = threading.Thread(target=lambda: rates.append(paced_sync(plan, send, tick)))
    cpu_start = time.process_time()
    pacer.start()
    try:
        while pacer.is_alive():
            receiver.take(poll())
    finally:
        pacer.join()
    cpu_s = time.process_time() - cpu_start
    flush()
    deadline = time.perf_counter() + DRAIN_TIMEOUT_S
    while not receiver.done and time.perf_counter() < deadline:
        receiver.take(poll())
    if not rates:
        raise RuntimeError("the producer's pacing thread failed")
    return receiver.result(rates[0], cpu_s)


async def run_async(
    plan: Plan,
    send: Callable[[bytes], Awaitable[object]],
    flush: Callable[[], Awaitable[object]],
    poll: Callable[[], Awaitable[list[bytes]]],
) -> Run:
    """An async pair: the consumer polls in this task, the producer paces in another."""
    receiver = Receiver(plan)
    await send(plan.value(READY))
    await flush()
    deadline = time.perf_counter() + DRAIN_TIMEOUT_S
    while not receiver.ready and time.perf_counter() < deadline:
        receiver.take(await poll())
    cpu_start = time.process_time()
    pacer = asyncio.create_task(paced_async(plan, send))
    while not pacer.done():
        receiver.take(await poll())
    rate = await pacer
    cpu_s = time.process_time() - cpu_start
    await flush()
    deadline = time.perf_counter() + DRAIN_TIMEOUT_S
    while not receiver.done and time.perf_counter() < deadline:
        receiver.take(await poll())
    return receiver.result(rate, cpu_s)


# ---- the pairs: each client's producer and consumer with the equal settings


def kafkette_sync(bootstrap: str, topic: str, plan: Plan) -> Run:
    producer_settings = {"acks": -1, "enable_idempotence": True, "linger_ms": plan.linger_ms}
    with (
        Consumer(bootstrap_servers=bootstrap, fetch_min_bytes=1, fetch_max_wait_ms=500) as c,
        Producer(bootstrap_servers=bootstrap, batch_size=16_384, **producer_settings) as p,
    ):
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), 0)

        def send(value: bytes) -> None:
            p.send(topic, value, partition=0)

        def poll() -> list[bytes]:
            batches = c.poll(timeout_ms=100).values()
            return [r.value for batch in batches for r in batch if r.value is not None]

        return run_sync(plan, send, p.flush, lambda: None, poll)


def kafkette_async(bootstrap: str, topic: str, plan: Plan) -> Run:
    async def main() -> Run:
        producer_settings = {"acks": -1, "enable_idempotence": True, "linger_ms": plan.linger_ms}
        async with (
            AsyncConsumer(
                bootstrap_servers=bootstrap, fetch_min_bytes=1, fetch_max_wait_ms=500
            ) as c,
            AsyncProducer(bootstrap_servers=bootstrap, batch_size=16_384, **producer_settings) as p,
        ):
            c.assign([TopicPartition(topic, 0)])
            c.seek(TopicPartition(topic, 0), 0)

            async def send(value: bytes) -> object:
                return await p.send(topic, value, partition=0)

            async def poll() -> list[bytes]:
                batches = (await c.poll(timeout_ms=100)).values()
                return [r.value for batch in batches for r in batch if r.value is not None]

            return await run_async(plan, send, p.flush, poll)

    return asyncio.run(main())


def confluent_producer(bootstrap: str, plan: Plan) -> ConfluentProducer:
    """confluent-kafka's producer at the equal settings (see the module's docstring)."""
    return ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": plan.linger_ms,
            "batch.size": 16_384,
            "log_level": 4,
        }
    )


def confluent_consumer(bootstrap: str, group_id: str = "bench-latency") -> ConfluentConsumer:
    """confluent-kafka's consumer at the equal settings (assigned, never committing)."""
    return ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "fetch.min.bytes": 1,
            "fetch.wait.max.ms": 500,
            "log_level": 4,
        }
    )


def confluent(bootstrap: str, topic: str, plan: Plan) -> Run:
    producer = confluent_producer(bootstrap, plan)
    consumer = confluent_consumer(bootstrap)
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])

        def send(value: bytes) -> None:
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    return
                except BufferError:
                    producer.poll(0.001)

        def flush() -> None:
            if producer.flush(DRAIN_TIMEOUT_S):
                raise RuntimeError("confluent-kafka: records still unacknowledged")

        def poll() -> list[bytes]:
            # consume() waits for all of num_messages or its timeout: poll() returns at the
            # first record, and what else is queued follows without waiting.
            first = consumer.poll(0.1)
            if first is None:
                return []
            values = []
            for message in [first, *consumer.consume(num_messages=1000, timeout=0)]:
                if message.error():
                    raise RuntimeError(message.error())
                values.append(message.value())
            return values

        return run_sync(plan, send, flush, lambda: producer.poll(0), poll)
    finally:
        consumer.close()


def aiokafka(bootstrap: str, topic: str, plan: Plan) -> Run:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def main() -> Run:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=plan.linger_ms,
            max_batch_size=16_384,
        )
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            fetch_min_bytes=1,
            fetch_max_wait_ms=500,
        )
        await producer.start()
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)

            async def send(value: bytes) -> object:
                return await producer.send(topic, value, partition=0)

            async def poll() -> list[bytes]:
                batches = (await consumer.getmany(timeout_ms=100)).values()
                return [r.value for batch in batches for r in batch if r.value is not None]

            return await run_async(plan, send, producer.flush, poll)
        finally:
            await consumer.stop()
            await producer.stop()

    return asyncio.run(main())


# ---- mixed pairs (--mixed): which side of a pair its latency comes from


def kafkette_to_confluent(bootstrap: str, topic: str, plan: Plan) -> Run:
    """kafkette's sync producer, confluent-kafka's consumer."""
    consumer = confluent_consumer(bootstrap)
    producer_settings = {"acks": -1, "enable_idempotence": True, "linger_ms": plan.linger_ms}
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        with Producer(bootstrap_servers=bootstrap, batch_size=16_384, **producer_settings) as p:

            def send(value: bytes) -> None:
                p.send(topic, value, partition=0)

            def poll() -> list[bytes]:
                first = consumer.poll(0.1)
                if first is None:
                    return []
                return [m.value() for m in [first, *consumer.consume(1000, timeout=0)]]

            return run_sync(plan, send, p.flush, lambda: None, poll)
    finally:
        consumer.close()


def confluent_to_kafkette(bootstrap: str, topic: str, plan: Plan) -> Run:
    """confluent-kafka's producer, kafkette's sync consumer."""
    producer = confluent_producer(bootstrap, plan)
    with Consumer(bootstrap_servers=bootstrap, fetch_min_bytes=1, fetch_max_wait_ms=500) as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), 0)

        def send(value: bytes) -> None:
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    return
                except BufferError:
                    producer.poll(0.001)

        def flush() -> None:
            if producer.flush(DRAIN_TIMEOUT_S):
                raise RuntimeError("confluent-kafka: records still unacknowledged")

        def poll() -> list[bytes]:
            batches = c.poll(timeout_ms=100).values()
            return [r.value for batch in batches for r in batch if r.value is not None]

        return run_sync(plan, send, flush, lambda: producer.poll(0), poll)


PAIRS: dict[str, Callable[[str, str, Plan], Run]] = {
    "kafkette-sync": kafkette_sync,
    "kafkette-async": kafkette_async,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka,
    "kafkette-p/ck-c": kafkette_to_confluent,
    "ck-p/kafkette-c": confluent_to_kafkette,
}
MIXED = ("kafkette-p/ck-c", "ck-p/kafkette-c")


def run_on_new_topic(admin: AdminClient, bootstrap: str, name: str, plan: Plan) -> Run:
    """One pair's run on a one-partition topic of its own, deleted afterwards."""
    topic = f"bench-latency-{name.replace('/', '.')}-{plan.rate}-{next(_topic_numbers)}"
    admin.create_topics([NewTopic(topic, 1)]).all()
    try:
        return PAIRS[name](bootstrap, topic, plan)
    finally:
        admin.delete_topics([topic]).all()


Figures = dict[str, dict[str, tuple[float, float]]]
"""client -> percentile name -> (median over rounds, best round) in ms"""


def summarize(runs: dict[str, list[Run]]) -> Figures:
    return {
        name: {
            label: (
                statistics.median(r.percentile(q) for r in client_runs),
                min(r.percentile(q) for r in client_runs),
            )
            for label, q in PERCENTILES
        }
        for name, client_runs in runs.items()
    }


def print_rate(plan: Plan, rounds: int, runs: dict[str, list[Run]], figures: Figures) -> None:
    measured = plan.total - plan.skipped
    print(
        f"\n{plan.rate:,} records/s of {plan.size} B for {plan.seconds:g} s "
        f"({measured:,} measured per run), {rounds} alternating rounds; ms, median (best); "
        "cpu: this process's CPU time per record sent (all threads), µs, median"
    )
    header = f"{'client':<16}{'sent/s':>9}"
    for label, _ in PERCENTILES:
        header += f"{label:>18}"
    header += "".join(f"{'x ' + label:>9}" for label, _ in PERCENTILES)
    header += f"{'cpu':>7}{'x cpu':>8}"
    print(header)
    peer = figures.get(PEER)
    peer_cpu = statistics.median(r.cpu_us for r in runs[PEER]) if PEER in runs else None
    for name, cells in figures.items():
        line = f"{name:<16}{statistics.median(r.rate for r in runs[name]):>9,.0f}"
        for label, _ in PERCENTILES:
            median, best = cells[label]
            line += f"{median:>10.2f} ({best:>6.2f})"
        if peer is not None:
            line += "".join(f"{cells[lb][0] / peer[lb][0]:>8.2f}x" for lb, _ in PERCENTILES)
        cpu = statistics.median(r.cpu_us for r in runs[name])
        line += f"{cpu:>7.1f}"
        if peer_cpu:
            line += f"{cpu / peer_cpu:>7.2f}x"
        print(line)


def plot(path: str, results: dict[int, tuple[Figures, dict[str, float]]], title: str) -> None:
    """Grouped bars: one panel per rate, the median of each percentile per client (log ms),
    each client's median achieved send rate in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 5), squeeze=False)
    for axis, (rate, (figures, sent)) in zip(axes[0], sorted(results.items()), strict=True):
        names = list(figures)
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            xs = [j + i * width for j in range(len(PERCENTILES))]
            heights = [figures[name][label][0] for label, _ in PERCENTILES]
            axis.bar(xs, heights, width, label=f"{name}, sent {sent[name]:,.0f}/s")
        axis.set_xticks([j + 0.4 - width / 2 for j in range(len(PERCENTILES))])
        axis.set_xticklabels([label for label, _ in PERCENTILES])
        axis.set_yscale("log")
        axis.yaxis.set_major_locator(FixedLocator(LATENCY_TICKS_MS))
        axis.yaxis.set_major_formatter(ScalarFormatter())
        axis.yaxis.set_minor_locator(NullLocator())
        axis.set_ylabel("end-to-end latency, ms (median of rounds)")
        axis.set_title(f"{rate:,} records/s")
        axis.grid(axis="y", which="both", alpha=0.3)
        axis.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"\nplot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,50000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="per run, warm-up included")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=100, help="record value bytes (>= 16)")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--disk", action="store_true", help="serve --data-dir, not --memory")
    parser.add_argument("--only", action="append", default=[], choices=CLIENTS + MIXED)
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="also kafkette's sync producer with confluent-kafka's consumer and the reverse",
    )
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of the medians")
    args = parser.parse_args()
    if args.size < STAMP.size:
        parser.error(f"--size must be at least {STAMP.size}")
    if args.warmup >= args.seconds:
        parser.error("--warmup must be shorter than --seconds")
    offered = CLIENTS + MIXED if args.mixed else CLIENTS
    names = [n for n in CLIENTS + MIXED if n in args.only] if args.only else list(offered)
    data_dir = tempfile.mkdtemp(prefix="bench-latency-") if args.disk else None
    results: dict[int, tuple[Figures, dict[str, float]]] = {}
    try:
        with (
            BrokerProcess(data_dir) as broker,
            AdminClient(bootstrap_servers=broker.bootstrap) as admin,
        ):
            for rate in (int(r) for r in args.rates.split(",")):
                plan = Plan(rate, args.seconds, args.warmup, args.size, args.linger_ms)
                runs: dict[str, list[Run]] = {name: [] for name in names}
                for round_number in range(args.rounds):
                    turn = round_number % len(names)
                    for name in names[turn:] + names[:turn]:
                        runs[name].append(run_on_new_topic(admin, broker.bootstrap, name, plan))
                sent = {name: statistics.median(r.rate for r in runs[name]) for name in names}
                results[rate] = (summarize(runs), sent)
                print_rate(plan, args.rounds, runs, results[rate][0])
    finally:
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.plot:
        storage = "disk" if args.disk else "memory"
        title = (
            f"end-to-end latency, kafkette serve --{storage}, {args.size} B records, "
            f"linger.ms {args.linger_ms}, acks=all"
        )
        plot(args.plot, results, title)


if __name__ == "__main__":
    main()
