"""Share-group (KIP-932) consumption on ``kafkette serve``: kafkette's and confluent-kafka's
``ShareConsumer`` beside confluent-kafka's classic ``Consumer``, same broker, same run.

One ``kafkette serve --memory`` child process. Each round, for each consumer kind (the
order alternating), a fresh one-partition topic: the consumer subscribes first and
reads one probe record (a share partition starts at the log end, Kafka's default; the
classic consumer joins its group), then ``--records`` 100-byte records are produced and
flushed, and the clock runs from the flush until the consumer has seen them all (the
share consumer in implicit acknowledgement mode, so each poll accepts the last one's
records). The table gives the median and best records/s of the rounds and the median
records per CPU-second of this process (the consumer's threads; the broker is a child
process) (``share`` is confluent-kafka's, ``kafkette`` our ShareConsumer,
``kafkette-async`` our AsyncShareConsumer on asyncio), each share consumer's ratio to the
classic one, and ours to confluent-kafka's.

    .venv/bin/python bench/share.py [--records 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
from confluent_kafka import Consumer, Producer, ShareConsumer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette import AsyncShareConsumer
from kafkette import ShareConsumer as KafketteShareConsumer
from tests.brokers import BrokerProcess

VALUE = b"v" * 100


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def run(bootstrap: str, kind: str, records: int) -> tuple[float, float]:
    """Records/s and records per CPU-second of one consumer of ``kind`` over ``records``
    fresh records."""
    topic = f"{kind}-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    if kind == "kafkette-async":
        return anyio.run(run_async, bootstrap, topic, group, records)
    poll: Callable[[], list[object]]
    if kind == "share":
        share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        share.subscribe([topic])
        poll, close = (lambda: list(share.poll(0.2))), share.close
    elif kind == "kafkette":
        ours = KafketteShareConsumer(bootstrap_servers=bootstrap, group_id=group)
        ours.subscribe([topic])
        poll, close = (lambda: list(ours.poll(timeout=0.2))), ours.close
    else:
        classic = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        )
        classic.subscribe([topic])
        poll, close = (lambda: classic.consume(1000, 0.2)), classic.close
    try:
        while True:  # the probe: subscribed, assigned, reading
            produce(bootstrap, topic, 1)
            if poll():
                break
        produce(bootstrap, topic, records)
        start, cpu = time.perf_counter(), time.process_time()
        seen = 0
        while seen < records:
            seen += len(poll())
        return records / (time.perf_counter() - start), records / (time.process_time() - cpu)
    finally:
        close()


async def run_async(bootstrap: str, topic: str, group: str, records: int) -> tuple[float, float]:
    async with AsyncShareConsumer(bootstrap_servers=bootstrap, group_id=group) as consumer:
        consumer.subscribe([topic])
        while True:  # the probe
            await anyio.to_thread.run_sync(produce, bootstrap, topic, 1)
            if await consumer.poll(timeout=0.2):
                break
        await anyio.to_thread.run_sync(produce, bootstrap, topic, records)
        start, cpu = time.perf_counter(), time.process_time()
        seen = 0
        while seen < records:
            seen += len(await consumer.poll(timeout=0.2))
        return records / (time.perf_counter() - start), records / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    kinds = ["share", "kafkette", "kafkette-async", "classic"]
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    per_cpu: dict[str, list[float]] = {k: [] for k in kinds}
    with BrokerProcess() as broker:
        for round_ in range(args.repeat):
            for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                rate, cpu = run(broker.bootstrap, kind, args.records)
                rates[kind].append(rate)
                per_cpu[kind].append(cpu)
    median = statistics.median
    print(f"{args.records} x 100 B, {args.repeat} rounds (records/s median / best; per CPU-s)")
    for kind in kinds:
        print(
            f"  {kind:15} {median(rates[kind]):>10,.0f} / {max(rates[kind]):>10,.0f};"
            f" {median(per_cpu[kind]):>10,.0f}"
        )
    ratio_median = median(rates["share"]) / median(rates["classic"])
    ratio_best = max(rates["share"]) / max(rates["classic"])
    print(f"  share / classic: {ratio_median:.2f}x median, {ratio_best:.2f}x best")
    for ours in ("kafkette", "kafkette-async"):
        print(
            f"  {ours} / share: {median(rates[ours]) / median(rates['share']):.2f}x median,"
            f" {max(rates[ours]) / max(rates['share']):.2f}x best,"
            f" {median(per_cpu[ours]) / median(per_cpu['share']):.2f}x per CPU-second"
        )


if __name__ == "__main__":
    main()
