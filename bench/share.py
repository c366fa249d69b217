"""Share-group (KIP-932) consumption on ``kafkette serve``: kafkette's and confluent-kafka's
``ShareConsumer`` beside confluent-kafka's classic ``Consumer``, same broker, same run.

One ``kafkette serve --memory`` child process. Each round, for each consumer kind (the
order alternating), a fresh one-partition topic: the consumer subscribes first and
reads one probe record (a share partition starts at the log end, Kafka's default; the
classic consumer joins its group), then ``--records`` 100-byte records are produced and
flushed, and the clock runs from the flush until the consumer has seen them all (the
share consumer in implicit acknowledgement mode, so each poll accepts the last one's
records). The table gives the median and best records/s of the rounds (``share`` is
confluent-kafka's, ``kafkette`` ours), each share consumer's ratio to the classic one, and
kafkette's to confluent-kafka's.

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

from confluent_kafka import Consumer, Producer, ShareConsumer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def run(bootstrap: str, kind: str, records: int) -> float:
    """Records/s of one consumer of ``kind`` over ``records`` fresh records."""
    topic = f"{kind}-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
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
        start = time.perf_counter()
        seen = 0
        while seen < records:
            seen += len(poll())
        return records / (time.perf_counter() - start)
    finally:
        close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    kinds = ["share", "kafkette", "classic"]
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    with BrokerProcess() as broker:
        for round_ in range(args.repeat):
            for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                rates[kind].append(run(broker.bootstrap, kind, args.records))
    print(f"{args.records} x 100 B, {args.repeat} rounds (median / best records/s)")
    for kind in kinds:
        print(f"  {kind:8} {statistics.median(rates[kind]):>10,.0f} / {max(rates[kind]):>10,.0f}")
    ratio_median = statistics.median(rates["share"]) / statistics.median(rates["classic"])
    ratio_best = max(rates["share"]) / max(rates["classic"])
    print(f"  share / classic: {ratio_median:.2f}x median, {ratio_best:.2f}x best")
    ours_median = statistics.median(rates["kafkette"]) / statistics.median(rates["share"])
    ours_best = max(rates["kafkette"]) / max(rates["share"])
    print(f"  kafkette / share: {ours_median:.2f}x median, {ours_best:.2f}x best")


if __name__ == "__main__":
    main()
