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

Each broker is a child process on a free loopback port; runs alternate
between brokers and the best of ``--repeat`` rounds is kept for each, so all
see the same machine load. Targets: kafkette produce >= 1.0x Tansu, consume
>= 1.0x Tansu.

    .venv/bin/python bench/broker.py [--records 100000] [--repeat 3]
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
    produce_s = produce(bootstrap, topic, records)
    consume_s = consume(bootstrap, topic, records)
    cpu_before = cpu_seconds(pid)
    passes = [raw_fetch(bootstrap, topic, records + 1) for _ in range(FETCH_PASSES)]
    cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / FETCH_PASSES
    fetch_s, received = min(passes)
    return produce_s, consume_s, received / fetch_s / 1e6, cpu_ms


Timing = tuple[float, float, float, float]
"""produce seconds, consume seconds, raw fetch MB/s (best of 3 reads), broker CPU ms
per raw fetch pass"""


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
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
    CONSUMER_SETTINGS["max.partition.fetch.bytes"] = args.partition_fetch_bytes
    if args.fetch_queue_backoff_ms is not None:
        CONSUMER_SETTINGS["fetch.queue.backoff.ms"] = args.fetch_queue_backoff_ms
    records: int = args.records
    megabytes = records * RECORD_SIZE / 1e6
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-") as tmp:
        brokers: dict[str, Callable[[str], Timing]] = {
            "tansu (memory)": lambda topic: run_tansu(topic, records),
            "kafkette (memory)": lambda topic: run_kafkette(None, topic, records),
            "kafkette (disk)": lambda topic: run_kafkette(
                os.path.join(tmp, f"data-{topic}"), topic, records
            ),
        }
        best: dict[str, Timing] = {}
        for round_ in range(args.repeat):
            for name, run in brokers.items():
                produce_s, consume_s, fetch_mb_s, cpu_ms = run(f"bench-{round_}")
                old = best.get(name, (math.inf, math.inf, 0.0, math.inf))
                best[name] = (
                    min(old[0], produce_s),
                    min(old[1], consume_s),
                    max(old[2], fetch_mb_s),
                    min(old[3], cpu_ms),
                )
                print(
                    f"round {round_ + 1} {name:18} produce {megabytes / produce_s:7.1f} MB/s"
                    f"  consume {megabytes / consume_s:7.1f} MB/s"
                    f"  raw fetch {fetch_mb_s:7.1f} MB/s, broker CPU {cpu_ms:5.1f} ms/pass",
                    file=sys.stderr,
                )
    tansu_produce, tansu_consume, tansu_fetch, _ = best["tansu (memory)"]
    print(
        f"\n{records} records of {RECORD_SIZE} B, one partition, acks=1, confluent-kafka "
        f"({', '.join(f'{k} {v}' for k, v in CONSUMER_SETTINGS.items())}), best of {args.repeat}"
    )
    print(
        f"{'broker':18} {'produce MB/s':>12} {'vs tansu':>9} {'consume MB/s':>13} {'vs tansu':>9}"
        f" {'raw fetch MB/s':>14} {'vs tansu':>9} {'CPU ms/pass':>11}"
    )
    for name, (produce_s, consume_s, fetch_mb_s, cpu_ms) in best.items():
        print(
            f"{name:18} {megabytes / produce_s:12.1f} {tansu_produce / produce_s:8.2f}x"
            f" {megabytes / consume_s:13.1f} {tansu_consume / consume_s:8.2f}x"
            f" {fetch_mb_s:14.1f} {fetch_mb_s / tansu_fetch:8.2f}x {cpu_ms:11.1f}"
        )
    print(
        f"(raw fetch: Fetch v{FETCH_VERSION} by hand, {FETCH_BYTES >> 20} MiB per fetch;"
        f" CPU: the broker's per raw fetch pass, least of {FETCH_PASSES}-pass averages)"
    )


if __name__ == "__main__":
    main()
