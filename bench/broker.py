"""Broker throughput: ``kafkette serve`` (memory and disk) against Tansu (memory).

confluent-kafka (librdkafka) is the client on both sides: 1 KiB records, one
partition, ``acks=1``, no compression. For each broker, on the same run:

- produce MB/s: from the first ``produce()`` until ``flush()`` returns (every
  record acknowledged);
- consume MB/s: a fresh consumer assigned to offset 0 until it has every
  record. At librdkafka's defaults a consumer whose queue holds
  ``queued.min.messages`` (100,000) records stops fetching for
  ``fetch.queue.backoff.ms`` (1 s): a broker that answers faster than the
  application takes records can then measure slower (150,000 records at
  80-110 MB/s instead of 450-650); ``--fetch-queue-backoff-ms 10`` removes that;
- raw fetch MB/s: the broker's fetch path alone: Fetch v4 requests written by
  hand on one socket, 16 MiB per fetch, from offset 0 until every record is
  back; the records are not parsed (only batch headers are read to find the
  next offset), so the client costs little beside the broker;
- broker CPU ms per raw fetch pass: the broker process's user and system time
  (``/proc``) over the three raw fetch passes, divided by three. sendfile hands
  a disk segment's pages to the socket, vmsplice and splice a memory log's
  arena pages (kafkette.server.net.zero_copy): neither copies the stored bytes.

Each broker is a fresh child process on a free loopback port in each round;
rounds alternate between brokers, so all see the same machine load, and the
summary gives the best and the median of the ``--repeat`` rounds. Targets:
kafkette produce >= 1.0x Tansu, consume >= 1.0x Tansu, and memory produce >= disk
produce in every round (``--produce-only``: memory and disk produce alone, the
ratio of each round printed)::

    .venv/bin/python bench/broker.py [--records 100000] [--repeat 3]
    .venv/bin/python bench/broker.py --produce-only --records 150000 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkette.protocol.headers import decode_response, encode_request_frame
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from tests.brokers import BrokerProcess, TansuProcess

RECORD_SIZE = 1024
TIMEOUT_S = 120.0
CONSUMER_SETTINGS: dict[str, int] = {}
"""Consumer settings from the command line (librdkafka's defaults otherwise)."""
PRODUCE_ONLY = False
"""Whether rounds measure produce alone (``--produce-only``)."""


def produce(bootstrap: str, topic: str, records: int) -> float:
    """Seconds to produce and have acknowledged ``records`` 1 KiB records."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.produce(topic, b"warm-up", partition=0)  # metadata and connection
    assert producer.flush(TIMEOUT_S) == 0
    value = os.urandom(RECORD_SIZE - 12)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, b"key-%08d" % i, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(TIMEOUT_S)
    elapsed = time.perf_counter() - start
    assert left == 0, f"{left} records not delivered"
    return elapsed


def consume(bootstrap: str, topic: str, records: int) -> float:
    """Seconds for a fresh consumer to read ``records`` records (after the warm-up one)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            **CONSUMER_SETTINGS,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 1)])
    count = 0
    start = time.perf_counter()
    deadline = start + TIMEOUT_S
    while count < records and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                count += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    assert count == records, f"consumed {count} of {records}"
    return elapsed


FETCH_BYTES = 16 * 1024 * 1024
FETCH_VERSION = 4
_FRAME = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
LAST_OFFSET_DELTA_AT = 23


def raw_fetch(bootstrap: str, topic: str, end_offset: int) -> tuple[float, int]:
    """Seconds and bytes to fetch partition 0 from offset 0 to ``end_offset`` with
    hand-made Fetch v4 requests of FETCH_BYTES, the records not parsed."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    buffer = bytearray(FETCH_BYTES + (1 << 20))
    offset, received, correlation = 0, 0, 0
    start = time.perf_counter()
    try:
        while offset < end_offset:
            correlation += 1
            request = FetchRequest(
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=FETCH_BYTES,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=FETCH_BYTES
                            )
                        ],
                    )
                ],
            )
            sock.sendall(encode_request_frame(request, FETCH_VERSION, correlation, "bench"))
            size = _FRAME.unpack(_receive(sock, buffer, 4))[0]
            if size > len(buffer):
                buffer = bytearray(size)
            frame = _receive(sock, buffer, size)
            received += size + 4
            _, response = decode_response(frame, FetchRequest.API_KEY, FETCH_VERSION)
            data = memoryview(response.responses[0].partitions[0].records or b"")
            assert response.responses[0].partitions[0].error_code == 0
            position = 0
            while position + _BATCH_HEAD.size <= len(data):  # whole batches only
                base, length = _BATCH_HEAD.unpack_from(data, position)
                if position + 12 + length > len(data):
                    break
                (delta,) = struct.unpack_from(">i", data, position + LAST_OFFSET_DELTA_AT)
                offset = base + delta + 1
                position += 12 + length
    finally:
        sock.close()
    return time.perf_counter() - start, received


def _receive(sock: socket.socket, buffer: bytearray, size: int) -> memoryview:
    view = memoryview(buffer)[:size]
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise ConnectionError("the broker closed the connection")
        got += n
    return view


FETCH_PASSES = 3


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (all its threads); NaN
    where ``/proc`` is not there."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_fetch(bootstrap: str, topic: str, records: int, pid: int) -> Timing:
    cpu_before = cpu_seconds(pid)
    produce_s = produce(bootstrap, topic, records)
    produce_cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000
    if PRODUCE_ONLY:
        return produce_s, produce_cpu_ms, math.nan, math.nan, math.nan
    consume_s = consume(bootstrap, topic, records)
    cpu_before = cpu_seconds(pid)
    passes = [raw_fetch(bootstrap, topic, records + 1) for _ in range(FETCH_PASSES)]
    cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / FETCH_PASSES
    fetch_s, received = min(passes)
    return produce_s, produce_cpu_ms, consume_s, received / fetch_s / 1e6, cpu_ms


Timing = tuple[float, float, float, float, float]
"""produce seconds, the broker's CPU ms over the produce, consume seconds, raw fetch MB/s
(best of 3 reads), broker CPU ms per raw fetch pass"""


def run_kafkette(data_dir: str | None, topic: str, records: int) -> Timing:
    with BrokerProcess(data_dir) as broker:
        assert broker.process is not None
        return run_fetch(broker.bootstrap, topic, records, broker.process.pid)


def run_tansu(topic: str, records: int) -> Timing:
    tansu = TansuProcess().start()
    try:
        assert tansu.process is not None
        tansu.create_topic(topic, 1)
        return run_fetch(tansu.bootstrap, topic, records, tansu.process.pid)
    finally:
        tansu.stop()


Rates = tuple[float, float, float, float, float]
"""produce, consume and raw fetch MB/s, the broker's CPU ms per raw fetch pass and over
the produce"""


def median(values: list[float]) -> float:
    """The median of ``values`` (the mean of the middle two for an even count)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> None:
    global PRODUCE_ONLY
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--produce-only",
        action="store_true",
        help="kafkette memory and disk produce alone, alternating (no Tansu, no reads)",
    )
    parser.add_argument(
        "--partition-fetch-bytes",
        type=int,
        default=1_048_576,
        help="the consumer's max.partition.fetch.bytes (librdkafka's default: 1 MiB)",
    )
    parser.add_argument(
        "--fetch-queue-backoff-ms",
        type=int,
        default=None,
        help="the consumer's fetch.queue.backoff.ms (librdkafka's default: 1000)",
    )
    args = parser.parse_args()
    PRODUCE_ONLY = args.produce_only
    CONSUMER_SETTINGS["max.partition.fetch.bytes"] = args.partition_fetch_bytes
    if args.fetch_queue_backoff_ms is not None:
        CONSUMER_SETTINGS["fetch.queue.backoff.ms"] = args.fetch_queue_backoff_ms
    records: int = args.records
    megabytes = records * RECORD_SIZE / 1e6
    # MB/s (produce, consume, raw fetch) and CPU ms per round, by broker
    rounds: dict[str, list[Rates]] = {}
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-") as tmp:
        brokers: dict[str, Callable[[str], Timing]] = {
            "tansu (memory)": lambda topic: run_tansu(topic, records),
            "kafkette (memory)": lambda topic: run_kafkette(None, topic, records),
            "kafkette (disk)": lambda topic: run_kafkette(
                os.path.join(tmp, f"data-{topic}"), topic, records
            ),
        }
        if PRODUCE_ONLY:
            del brokers["tansu (memory)"]
        for round_ in range(args.repeat):
            for name, run in brokers.items():
                produce_s, produce_cpu_ms, consume_s, fetch_mb_s, cpu_ms = run(f"bench-{round_}")
                rates = (
                    megabytes / produce_s,
                    megabytes / consume_s,
                    fetch_mb_s,
                    cpu_ms,
                    produce_cpu_ms,
                )
                rounds.setdefault(name, []).append(rates)
                line = (
                    f"round {round_ + 1} {name:18} produce {rates[0]:7.1f} MB/s"
                    f" (broker CPU {produce_cpu_ms:5.0f} ms)"
                )
                if not PRODUCE_ONLY:
                    line += (
                        f"  consume {rates[1]:7.1f} MB/s"
                        f"  raw fetch {fetch_mb_s:7.1f} MB/s, broker CPU {cpu_ms:5.1f} ms/pass"
                    )
                print(line, file=sys.stderr)
            if PRODUCE_ONLY:
                memory, disk = rounds["kafkette (memory)"][-1][0], rounds["kafkette (disk)"][-1][0]
                print(
                    f"round {round_ + 1} memory/disk produce {memory / disk:.2f}x", file=sys.stderr
                )
    if PRODUCE_ONLY:
        report_produce_only(rounds, records, args.repeat)
    else:
        report(rounds, records, args.repeat)


def report_produce_only(rounds: dict[str, list[Rates]], records: int, repeat: int) -> None:
    """Memory against disk produce: each round's ratio, best and median."""
    memory = [r[0] for r in rounds["kafkette (memory)"]]
    disk = [r[0] for r in rounds["kafkette (disk)"]]
    ratios = [m / d for m, d in zip(memory, disk, strict=True)]
    memory_cpu = [r[4] for r in rounds["kafkette (memory)"]]
    disk_cpu = [r[4] for r in rounds["kafkette (disk)"]]
    print(f"\n{records} records of {RECORD_SIZE} B, one partition, acks=1, confluent-kafka")
    print(f"{'broker':18} {'produce MB/s, each round':>44} {'best':>7} {'median':>7}")
    for name, values in (("kafkette (memory)", memory), ("kafkette (disk)", disk)):
        each = " ".join(f"{v:7.1f}" for v in values)
        print(f"{name:18} {each:>44} {max(values):7.1f} {median(values):7.1f}")
    each = " ".join(f"{r:6.2f}x" for r in ratios)
    print(
        f"{'memory/disk':18} {each:>44} {max(memory) / max(disk):6.2f}x"
        f" {median(memory) / median(disk):6.2f}x"
    )
    print(f"{'broker CPU ms':18} {'each round':>44} {'least':>7} {'median':>7}")
    for name, values in (("kafkette (memory)", memory_cpu), ("kafkette (disk)", disk_cpu)):
        each = " ".join(f"{v:7.0f}" for v in values)
        print(f"{name:18} {each:>44} {min(values):7.0f} {median(values):7.0f}")
    won = sum(r >= 1.0 for r in ratios)
    print(f"memory produce >= disk produce in {won} of {repeat} alternating rounds")


def report(rounds: dict[str, list[Rates]], records: int, repeat: int) -> None:
    """Every broker against Tansu: best and median of the rounds."""
    print(
        f"\n{records} records of {RECORD_SIZE} B, one partition, acks=1, confluent-kafka "
        f"({', '.join(f'{k} {v}' for k, v in CONSUMER_SETTINGS.items())}), {repeat} rounds"
    )
    for label, pick in (("best", max), ("median", median)):
        summary = {
            name: (
                pick([r[0] for r in values]),
                pick([r[1] for r in values]),
                pick([r[2] for r in values]),
                (min if pick is max else median)([r[3] for r in values]),
            )
            for name, values in rounds.items()
        }
        tansu_produce, tansu_consume, tansu_fetch, _ = summary["tansu (memory)"]
        print(
            f"\n{label:18} {'produce MB/s':>12} {'vs tansu':>9} {'consume MB/s':>13}"
            f" {'vs tansu':>9} {'raw fetch MB/s':>14} {'vs tansu':>9} {'CPU ms/pass':>11}"
        )
        for name, (produce_mb_s, consume_mb_s, fetch_mb_s, cpu_ms) in summary.items():
            print(
                f"{name:18} {produce_mb_s:12.1f} {produce_mb_s / tansu_produce:8.2f}x"
                f" {consume_mb_s:13.1f} {consume_mb_s / tansu_consume:8.2f}x"
                f" {fetch_mb_s:14.1f} {fetch_mb_s / tansu_fetch:8.2f}x {cpu_ms:11.1f}"
            )
    print(
        f"(raw fetch: Fetch v{FETCH_VERSION} by hand, {FETCH_BYTES >> 20} MiB per fetch;"
        f" CPU: the broker's per raw fetch pass, averaged over {FETCH_PASSES} passes)"
    )


if __name__ == "__main__":
    main()
