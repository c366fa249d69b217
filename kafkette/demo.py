"""kafkette end to end: ``python -m kafkette.demo``.

Starts the bundled broker (``kafkette serve``) on a free loopback port, then,
with kafkette's own clients: creates a topic (AdminClient), produces 10,000
keyed records with headers (Producer), reads every one back (Consumer) and
checks them; then does the same against the in-process fake
(``memory://demo``), and stops the broker. Exits non-zero if anything differs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkette import AdminClient, Consumer, ConsumerRecord, NewTopic, Producer, TopicPartition

RECORDS = 10_000
PARTITIONS = 3


def start_broker(log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``kafkette serve --memory`` on a free port; returns the process and the port."""
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "kafkette", "serve", "--memory", "--listen", "127.0.0.1:0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", log_path.read_text())
        if match:
            return process, int(match.group(1))
        if process.poll() is not None:
            raise SystemExit(f"kafkette serve exited:\n{log_path.read_text()}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("kafkette serve did not start within 30 s")


def round_trip(bootstrap: str, topic: str) -> None:
    """Create ``topic``, produce RECORDS records, read them back and check each one."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)]).all()
        description = admin.describe_topics([topic])[topic].result()
        count = len(description.partitions)
        print(f"  created {topic!r}: {count} partitions, id {description.topic_id}")

    started = time.perf_counter()
    sent: dict[bytes, bytes] = {}
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="lz4") as producer:
        futures = []
        for i in range(RECORDS):
            key, value = f"customer-{i % 500}".encode(), f"order {i}".encode()
            futures.append(producer.send(topic, value, key=key, headers=[("seq", str(i).encode())]))
            sent[f"{i}".encode()] = value
        producer.flush()
        metadata = [f.result() for f in futures]
    elapsed = time.perf_counter() - started
    per_partition = {p: sum(1 for m in metadata if m.partition == p) for p in range(PARTITIONS)}
    print(f"  produced {RECORDS} records in {elapsed:.2f} s (idempotent, lz4)")
    print(f"  records per partition: {per_partition}")

    started = time.perf_counter()
    received: list[ConsumerRecord] = []
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + 30
        while len(received) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received.extend(records)
    elapsed = time.perf_counter() - started
    got = {dict(r.headers)["seq"]: r.value for r in received}
    offsets_ok = all(
        sorted(r.offset for r in received if r.partition == p) == list(range(per_partition[p]))
        for p in range(PARTITIONS)
    )
    if got != sent or len(received) != RECORDS or not offsets_ok:
        raise SystemExit(f"  MISMATCH: {len(received)} records read back, expected {RECORDS}")
    print(f"  consumed {len(received)} records in {elapsed:.2f} s")
    print("  every key, value, header and offset matches what was sent")


def main() -> None:
    """Run the tour; exit non-zero on any difference."""
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "serve.log"
        process, port = start_broker(log_path)
        try:
            print(f"kafkette serve is listening on 127.0.0.1:{port} (memory storage)")
            round_trip(f"127.0.0.1:{port}", "orders")
        finally:
            process.terminate()
            process.wait(30)
        print("broker log:")
        for line in log_path.read_text().splitlines():
            print("  " + line.split(" ", 2)[-1])
    print("the same against the in-process fake, memory://demo (no sockets):")
    round_trip("memory://demo", "orders")
    print("all good")


if __name__ == "__main__":
    main()
