"""``kafkette perf produce|consume``: throughput and latency, as Kafka's
kafka-producer-perf-test and kafka-consumer-perf-test.

``perf produce TOPIC`` sends ``--records`` values of ``--size`` bytes (random
capital letters, one value reused, as Kafka's tool), at most ``--throughput``
records a second, and waits until every record is acknowledged. A topic that
does not exist is created on first use, as by ``kafkette produce`` (a Metadata
request allowing auto-creation, as a producer's first send); a broker that does
not create it fails the command at once, naming the topic. The latency of
a record is the time from ``send`` to its acknowledgement; it is measured on
at most one record every :data:`SAMPLE_INTERVAL_S` (and the last), so that
measuring does not slow the producer: a measured record costs a callback in
the producer's I/O thread, and one in 16 cost 15-20% of the producer's CPU at
1 KiB (``bench/perf_produce.py``). Without ``--throughput`` the records go out
in runs of :data:`RUN` plain sends, as ``bench/clients.py``'s loop sends them;
the clock is read between runs. ``perf consume TOPIC`` reads every partition from its
earliest offset, up to ``--records`` records or else to the end offsets it had
at the start; its latency is each sampled record's age when read (now minus its
timestamp): the end-to-end latency while a producer writes at the same time.

While it runs, every ``--interval`` seconds, a line of records/s, MB/s (10^6
bytes of values a second) and latency percentiles of that interval: on a
terminal one line redrawn in place, else one line each (``--json``: an object
each). At the end a summary of the whole run, and the sum of the partitions'
end offsets before and after (produce) or the offsets read (consume), which
agree with the records counted unless another client writes to the topic.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import OffsetSpec
from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    write,
)
from kafkette.cli.produce import CODECS
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.consumer.consumer import Consumer
from kafkette.errors import (
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkette.producer.futures import RecordFuture
from kafkette.producer.sync_producer import Producer
from kafkette.structs import TopicPartition

SAMPLE_EVERY = 16
"""The latency of one record read in this many is measured (perf consume)."""
SAMPLE_INTERVAL_S = 0.002
"""perf produce measures the latency of at most one record in this time (and the last)."""
RUN = 16
"""Records sent between two looks at the clock, when not rate-limited."""
PERCENTILES = (50.0, 95.0, 99.0)
SUMMARY_PERCENTILES = (50.0, 95.0, 99.0, 99.9)
POLL_TIMEOUT_S = 0.5


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("perf", help="producer and consumer throughput and latency")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    produce = actions.add_parser("produce", help="send records as fast as asked, measure")
    produce.add_argument("topic")
    produce.add_argument("--records", type=int, required=True, help="how many records")
    produce.add_argument("--size", type=int, default=100, help="value size in bytes (100)")
    produce.add_argument(
        "--throughput",
        type=float,
        default=0,
        metavar="RECORDS_PER_S",
        help="at most this many records a second (default: no limit)",
    )
    produce.add_argument("--acks", choices=("all", "-1", "0", "1"), help="acks (default all)")
    produce.add_argument("-z", dest="codec", choices=CODECS, help="compression codec")
    produce.add_argument("-p", dest="partition", type=int, help="write to this partition only")
    produce.set_defaults(run=run_produce)

    consume = actions.add_parser("consume", help="read a topic from the start, measure")
    consume.add_argument("topic")
    consume.add_argument(
        "--records", type=int, help="stop after this many (default: the end offsets at start)"
    )
    consume.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="give up after S seconds without a record (10)",
    )
    consume.set_defaults(run=run_consume)

    for action in (produce, consume):
        action.add_argument(
            "--interval", type=float, default=1.0, metavar="S", help="seconds between live lines"
        )
        add_common_arguments(action)


# ---- measuring


def percentile(ordered: Sequence[float], p: float) -> float:
    """The ``p``-th percentile of sorted values (nearest rank)."""
    index = min(len(ordered) - 1, max(0, int(len(ordered) * p / 100.0 + 0.5) - 1))
    return ordered[index]


def latency_fields(latencies_ms: list[float], points: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    if not ordered:
        return {}
    fields = {f"p{p:g}": round(percentile(ordered, p), 1) for p in points}
    fields["max"] = round(ordered[-1], 1)
    return fields


def rate_fields(records: int, value_bytes: int, seconds: float) -> dict[str, float]:
    seconds = max(seconds, 1e-9)
    return {
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(value_bytes / seconds / 1e6, 2),
    }


def latency_text(fields: dict[str, Any]) -> str:
    names = [n for n in fields if n.startswith("p") or n in ("avg", "max")]
    if not names:
        return "latency ms -"
    return "latency ms " + " ".join(f"{n} {fields[n]:.1f}" for n in names)


class Display:
    """The live lines (redrawn in place on a terminal) and the summary."""

    def __init__(self, args: argparse.Namespace, verb: str) -> None:
        self.json = args.json
        self.verb = verb
        self.tty = not self.json and sys.stdout.isatty()
        self.drawn = False

    def progress(self, fields: dict[str, Any]) -> None:
        if self.json:
            print_json_line({"type": "progress", **fields})
            return
        line = (
            f"{fields['records']} records {self.verb}, {fields['records_per_s']:.1f} records/s "
            f"({fields['mb_per_s']:.2f} MB/s), {latency_text(fields)}"
        )
        if self.tty:
            write(f"\r{line}\x1b[K")
            self.drawn = True
        else:
            write(line + "\n")

    def summary(self, fields: dict[str, Any], offsets_line: str) -> None:
        if self.json:
            print_json_line({"type": "summary", **fields})
            return
        if self.drawn:
            write("\r\x1b[K")
        write(
            f"{fields['records']} records {self.verb} in {fields['seconds']:.2f} s, "
            f"{fields['records_per_s']:.1f} records/s ({fields['mb_per_s']:.2f} MB/s), "
            f"{latency_text(fields)}\n{offsets_line}\n"
        )


def print_json_line(value: dict[str, Any]) -> None:
    import json

    write(json.dumps(value) + "\n")


class Window:
    """Counts and latencies since the last live line, and since the start."""

    def __init__(self, display: Display, interval: float) -> None:
        self.display = display
        self.interval = interval
        self.start = self.last = time.perf_counter()
        self.last_records = 0
        self.last_bytes = 0
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.recent: list[float] = []

    def add_latency(self, ms: float) -> None:
        with self.lock:
            self.latencies.append(ms)
            self.recent.append(ms)

    def maybe_report(self, records: int, value_bytes: int) -> None:
        now = time.perf_counter()
        if now - self.last < self.interval:
            return
        with self.lock:
            recent, self.recent = self.recent, []
        fields: dict[str, Any] = {"records": records - self.last_records}
        fields |= rate_fields(
            records - self.last_records, value_bytes - self.last_bytes, now - self.last
        )
        fields |= latency_fields(recent, PERCENTILES)
        self.display.progress(fields)
        self.last, self.last_records, self.last_bytes = now, records, value_bytes

    def totals(self, records: int, value_bytes: int, end: float) -> dict[str, Any]:
        with self.lock:
            latencies = list(self.latencies)
        fields: dict[str, Any] = {
            "records": records,
            "bytes": value_bytes,
            "seconds": round(end - self.start, 3),
        }
        fields |= rate_fields(records, value_bytes, end - self.start)
        if latencies:
            fields["avg"] = round(sum(latencies) / len(latencies), 1)
        fields |= latency_fields(latencies, SUMMARY_PERCENTILES)
        return fields


def end_offsets(admin: AdminClient, topic: str, partition: int | None) -> dict[int, int]:
    """The end offset of each partition of ``topic`` (or of ``partition`` only)."""
    if partition is None:
        described = admin.describe_topics([topic]).all()[topic]
        numbers = [p.partition for p in described.partitions]
    else:
        numbers = [partition]
    specs = {TopicPartition(topic, p): OffsetSpec.LATEST for p in numbers}
    return {tp.partition: info.offset for tp, info in admin.list_offsets(specs).all().items()}


# ---- produce


async def create_on_first_use(settings: dict[str, Any], topic: str) -> int | None:
    """Ask for ``topic``'s metadata allowing auto-creation, as a producer's first send
    does, so that the broker creates it; raise at once, naming the topic, when it does
    not (its ``auto.create.topics.enable`` is false, or the principal may not create
    topics): a producer would wait ``max.block.ms`` for it. The new topic's partition
    count, None while its leaders are not known yet."""
    async with KafkaClient(AdminConfig.from_user(settings)) as client:
        snapshot = await client.refresh_metadata([topic], allow_auto_topic_creation=True)
    info = snapshot.topics.get(topic)
    code = UnknownTopicOrPartitionError.code if info is None else info.error_code
    if code == UnknownTopicOrPartitionError.code:
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} does not exist and the broker does not create topics on "
            f"first use; create it with: kafkette topics create {topic}"
        )
    error_class = error_for_code(code)
    if error_class is not None and not error_class.retriable:
        raise error_class(f"topic {topic!r}")
    # else created; a retriable error (LEADER_NOT_AVAILABLE: Kafka is still electing
    # the new partitions' leaders) is the producer's to wait out
    return len(info.partitions) if info is not None and info.partitions else None


def offsets_before(args: argparse.Namespace, admin: AdminClient) -> dict[int, int]:
    """The end offsets before sending; none for a topic that the broker creates now."""
    described = admin.describe_topics([args.topic])[args.topic]
    if not isinstance(described.error, UnknownTopicOrPartitionError):
        return end_offsets(admin, args.topic, args.partition)
    count = anyio.run(create_on_first_use, client_settings(args, "admin"), args.topic)
    if args.partition is not None and count is not None and args.partition >= count:
        raise UnknownTopicOrPartitionError(
            f"partition {args.partition} of topic {args.topic!r}: "
            f"the topic was created with {count} partition(s)"
        )
    return {}


def payload(size: int) -> bytes:
    chooser = random.Random(size)
    return "".join(chooser.choices(string.ascii_uppercase, k=size)).encode()


def run_produce(args: argparse.Namespace) -> int:
    if args.records < 1 or args.size < 0 or args.throughput < 0 or args.interval <= 0:
        raise UsageError(
            "--records must be positive, --size, --throughput and --interval not negative"
        )
    overrides: dict[str, Any] = {}
    if args.codec:
        overrides["compression.type"] = args.codec
    if args.acks:
        overrides["acks"] = args.acks
    value = payload(args.size)
    display = Display(args, "sent")
    errors: list[BaseException] = []
    with AdminClient(client_settings(args, "admin")) as admin:
        before = offsets_before(args, admin)
        with Producer(client_settings(args, "producer", **overrides)) as producer:
            window = Window(display, args.interval)

            def sampled(started: float) -> Callable[[RecordFuture], None]:
                def done(future: RecordFuture) -> None:
                    error = future.exception()
                    if error is not None:
                        errors.append(error)
                    else:
                        window.add_latency((time.perf_counter() - started) * 1000.0)

                return done

            send_records(args, producer, value, window, sampled)
            producer.flush()
            finished = time.perf_counter()
        after = end_offsets(admin, args.topic, args.partition)
    if errors:
        raise errors[0]
    fields = window.totals(args.records, args.records * len(value), finished)
    stored = sum(after.values()) - sum(before.get(p, 0) for p in after)
    fields["end_offsets_before"] = sum(before.values())
    fields["end_offsets_after"] = sum(after.values())
    display.summary(
        fields,
        f"end offsets {fields['end_offsets_before']} -> {fields['end_offsets_after']} "
        f"(+{stored}) in {len(after)} partitions",
    )
    return 0


def send_records(
    args: argparse.Namespace,
    producer: Producer,
    value: bytes,
    window: Window,
    sampled: Callable[[float], Callable[[RecordFuture], None]],
) -> None:
    send = producer.send
    topic, partition, records, rate = args.topic, args.partition, args.records, args.throughput
    clock = time.perf_counter
    size = len(value)
    start = clock()
    next_sample = start
    if rate:
        for i in range(records):
            now = clock()
            future = send(topic, value, partition=partition)
            if now >= next_sample or i == records - 1:
                future.add_done_callback(sampled(now))
                next_sample = now + SAMPLE_INTERVAL_S
            wait = start + (i + 1) / rate - clock()
            if wait > 0:
                time.sleep(wait)
            window.maybe_report(i + 1, (i + 1) * size)
        return
    sent = 0
    while sent < records:
        run = min(RUN, records - sent)
        for _ in range(run - 1):
            send(topic, value, partition=partition)
        now = clock()
        future = send(topic, value, partition=partition)
        sent += run
        if now >= next_sample or sent == records:
            future.add_done_callback(sampled(now))
            next_sample = now + SAMPLE_INTERVAL_S
        if now - window.last >= window.interval:
            window.maybe_report(sent, sent * size)


# ---- consume


def run_consume(args: argparse.Namespace) -> int:
    if (args.records is not None and args.records < 1) or args.interval <= 0:
        raise UsageError("--records must be positive and --interval positive")
    display = Display(args, "read")
    with AdminClient(client_settings(args, "admin")) as admin:
        ends = end_offsets(admin, args.topic, None)
        tps = [TopicPartition(args.topic, p) for p in sorted(ends)]
        found = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST)).all()
        starts = {tp.partition: info.offset for tp, info in found.items()}
    wanted: int | None = args.records
    settings = client_settings(args, "consumer", **{"enable.auto.commit": "false"})
    settings.pop("group.id", None)
    read = value_bytes = 0
    positions = dict(starts)
    window = Window(display, args.interval)

    def done() -> bool:
        if wanted is not None:
            return read >= wanted
        return all(positions[p] >= ends[p] for p in ends)

    with Consumer(settings) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp.partition])
        window.start = window.last = time.perf_counter()
        idle_since = window.start
        while not done():
            left = None if wanted is None else wanted - read
            batch = consumer.poll(timeout=POLL_TIMEOUT_S, max_records=left)
            now = time.perf_counter()
            if not batch:
                # control records (transaction markers) move positions without records
                positions.update({tp.partition: consumer.position(tp) for tp in tps})
                if not done() and now - idle_since > args.timeout:
                    raise KafkaTimeoutError(
                        f"no record for {args.timeout:g} s, after {read} records"
                    )
                window.maybe_report(read, value_bytes)
                continue
            idle_since = now
            now_ms = time.time() * 1000.0
            for tp, records in batch.items():
                for n, record in enumerate(records):
                    value_bytes += len(record.value or b"")
                    if n % SAMPLE_EVERY == 0:
                        window.add_latency(max(0.0, now_ms - record.timestamp))
                read += len(records)
                positions[tp.partition] = records[-1].offset + 1
            window.maybe_report(read, value_bytes)
    finished = time.perf_counter()
    fields = window.totals(read, value_bytes, finished)
    fields["offsets_read"] = sum(positions[p] - starts[p] for p in starts)
    display.summary(
        fields,
        f"offsets {sum(starts.values())} -> {sum(positions.values())} "
        f"(+{fields['offsets_read']}) in {len(starts)} partitions",
    )
    return 0
