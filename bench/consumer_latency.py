"""The consumer's share of end-to-end latency: several consumers on the very same records (#30).

``bench/latency.py`` measures a client's producer and consumer together, so a consumer's
share is buried in the producer's (linger, batching) and in the noise of a loaded machine.
Here one confluent-kafka producer (acks=all, idempotent, ``linger.ms`` 5, ``batch.size``
16 KiB, as ``bench/latency.py``) sends ``--size`` byte records at a fixed rate to a
one-partition topic of one ``kafkette serve --memory``, and every consumer reads the same
records at the same time, each in a child process of its own (no shared interpreter lock):
confluent-kafka's, kafkette's sync one and kafkette's async one (``fetch.min.bytes`` 1,
``fetch.max.wait.ms`` 500). Each record carries the monotonic clock's reading at its send
(``perf_counter_ns``, the same clock in every process); each consumer reads the clock when
its poll hands the record over. As every consumer saw the same records from the same
producer and broker, the per-record difference of a consumer's latency to
confluent-kafka's is its consumer's share alone: the table gives each consumer's p50 and
p99 and the p50, p90 and p99 of that paired difference (ms; median over ``--rounds``, a
new topic each round; the first ``--warmup`` seconds' records left out).

    .venv/bin/python bench/consumer_latency.py [--rates 1000,20000] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import STAMP, Plan, confluent_consumer, confluent_producer, paced_sync
from kafkette import AdminClient, AsyncConsumer, Consumer, NewTopic, TopicPartition
from tests.brokers import BrokerProcess

CONSUMERS = ("confluent-kafka", "kafkette-sync", "kafkette-async")
PEER = "confluent-kafka"
CHILD_TIMEOUT_S = 120.0
START_TIMEOUT_S = 30.0


class Latencies:
    """A child's records: hand-over minus send, ns, by sequence number (0: not seen)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.by_sequence = [0] * total
        self.count = 0

    def take(self, values: list[bytes]) -> None:
        now = time.perf_counter_ns()
        for value in values:
            sent, sequence = STAMP.unpack_from(value)
            if 0 <= sequence < self.total and not self.by_sequence[sequence]:
                self.by_sequence[sequence] = now - sent
                self.count += 1

    @property
    def done(self) -> bool:
        return self.count == self.total


def child(kind: str, bootstrap: str, topic: str, total: int, out: str) -> None:
    """Consume ``total`` records, touch ``out + '.ready'`` once polling, then write the
    latencies to ``out`` (JSON)."""
    got = Latencies(total)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    ready = Path(out + ".ready")
    if kind == "confluent-kafka":
        from confluent_kafka import TopicPartition as ConfluentTopicPartition

        consumer = confluent_consumer(bootstrap, f"bench-consumer-latency-{os.getpid()}")
        try:
            consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
            consumer.poll(0.1)
            ready.touch()
            while not got.done and time.monotonic() < deadline:
                first = consumer.poll(0.1)
                if first is not None:
                    rest = consumer.consume(num_messages=1000, timeout=0)
                    values = [m.value() for m in [first, *rest] if m.error() is None]
                    got.take([v for v in values if v is not None])
        finally:
            consumer.close()
    elif kind == "kafkette-sync":
        settings = {"bootstrap_servers": bootstrap, "fetch_min_bytes": 1, "fetch_max_wait_ms": 500}
        with Consumer(settings) as c:
            c.assign([TopicPartition(topic, 0)])
            c.seek(TopicPartition(topic, 0), 0)
            c.poll(timeout_ms=100)
            ready.touch()
            while not got.done and time.monotonic() < deadline:
                batches = c.poll(timeout_ms=100).values()
                got.take([r.value for batch in batches for r in batch if r.value is not None])
    else:

        async def run() -> None:
            async with AsyncConsumer(
                bootstrap_servers=bootstrap, fetch_min_bytes=1, fetch_max_wait_ms=500
            ) as c:
                c.assign([TopicPartition(topic, 0)])
                c.seek(TopicPartition(topic, 0), 0)
                await c.poll(timeout_ms=100)
                ready.touch()
                while not got.done and time.monotonic() < deadline:
                    batches = (await c.poll(timeout_ms=100)).values()
                    got.take([r.value for b in batches for r in b if r.value is not None])

        asyncio.run(run())
    Path(out).write_text(json.dumps(got.by_sequence))


def produce(bootstrap: str, topic: str, plan: Plan) -> float:
    """Send the plan's records with confluent-kafka's producer; the achieved rate."""

    producer = confluent_producer(bootstrap, plan)

    def send(value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, value, partition=0)
                return
            except BufferError:
                producer.poll(0.001)

    def tick() -> None:
        producer.poll(0)

    rate = paced_sync(plan, send, tick)
    if producer.flush(CHILD_TIMEOUT_S):
        raise RuntimeError("confluent-kafka: records still unacknowledged")
    return rate


def percentile(ordered: list[int], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e6


Row = dict[str, float]


def one_round(bootstrap: str, topic: str, plan: Plan, scratch: str) -> tuple[float, dict[str, Row]]:
    """Start the consumers, produce, collect; each consumer's row of figures (ms)."""
    children: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for kind in CONSUMERS:
            out = os.path.join(scratch, f"{kind}-{topic}.json")
            command = [sys.executable, __file__, "--child", kind, bootstrap, topic]
            command += [str(plan.total), out]
            children[kind] = (subprocess.Popen(command, stderr=subprocess.DEVNULL), out)
        start = time.monotonic()
        while not all(Path(out + ".ready").exists() for _, out in children.values()):
            if time.monotonic() - start > START_TIMEOUT_S:
                raise RuntimeError("a consumer did not start")
            time.sleep(0.05)
        rate = produce(bootstrap, topic, plan)
        latencies: dict[str, list[int]] = {}
        for kind, (process, out) in children.items():
            process.wait(CHILD_TIMEOUT_S)
            latencies[kind] = json.loads(Path(out).read_text())
    finally:
        for process, _ in children.values():
            if process.poll() is None:
                process.kill()
    rows: dict[str, Row] = {}
    peer = latencies[PEER][plan.skipped :]
    for kind, values in latencies.items():
        measured = values[plan.skipped :]
        if not all(measured):
            raise AssertionError(f"{kind}: {measured.count(0)} records never arrived")
        ordered = sorted(measured)
        row = {"p50": percentile(ordered, 0.5), "p99": percentile(ordered, 0.99)}
        if kind != PEER:
            paired = sorted(mine - theirs for mine, theirs in zip(measured, peer, strict=True))
            row |= {f"d{q}": percentile(paired, f) for q, f in (("50", 0.5), ("90", 0.9))}
            row["d99"] = percentile(paired, 0.99)
        rows[kind] = row
    return rate, rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, bootstrap, topic, total, out = sys.argv[2:7]
        child(kind, bootstrap, topic, int(total), out)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,20000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="per round, warm-up included")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=100, help="record value bytes (>= 16)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.size < STAMP.size or args.warmup >= args.seconds:
        parser.error(f"--size must be at least {STAMP.size}, --warmup shorter than --seconds")
    with (
        BrokerProcess() as broker,
        AdminClient(bootstrap_servers=broker.bootstrap) as admin,
        tempfile.TemporaryDirectory(prefix="bench-consumer-latency-") as scratch,
    ):
        for rate in (int(r) for r in args.rates.split(",")):
            plan = Plan(rate, args.seconds, args.warmup, args.size, 5)
            rounds: list[dict[str, Row]] = []
            sent: list[float] = []
            for number in range(args.rounds):
                topic = f"bench-consumer-latency-{rate}-{number}"
                admin.create_topics([NewTopic(topic, 1)]).all()
                try:
                    achieved, rows = one_round(broker.bootstrap, topic, plan, scratch)
                finally:
                    admin.delete_topics([topic]).all()
                sent.append(achieved)
                rounds.append(rows)
            print(
                f"\n{rate:,} records/s of {args.size} B (sent {statistics.median(sent):,.0f}/s), "
                f"{args.rounds} rounds; ms, median over rounds; d: paired difference to {PEER}"
            )
            print(f"{'consumer':<16}{'p50':>8}{'p99':>8}{'d p50':>9}{'d p90':>9}{'d p99':>9}")
            for kind in CONSUMERS:
                line = f"{kind:<16}"
                for key, width in (("p50", 8), ("p99", 8), ("d50", 9), ("d90", 9), ("d99", 9)):
                    values = [r[kind][key] for r in rounds if key in r[kind]]
                    line += f"{statistics.median(values):>{width}.2f}" if values else " " * width
                print(line)


if __name__ == "__main__":
    main()
