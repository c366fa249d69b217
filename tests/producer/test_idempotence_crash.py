"""The idempotent producer across a SIGKILL and restart of `kafkette serve --data-dir`."""

from __future__ import annotations

import threading
from collections import defaultdict

from kafkette import Producer, RecordMetadata
from kafkette.producer.partitioner import keyed_partition
from tests.brokers import BrokerProcess
from tests.producer.helpers import create_topic, read_back

RECORDS = 100_000
PARTITIONS = 3


def test_sigkill_during_idempotent_produce_loses_and_duplicates_nothing_acknowledged(
    disk_broker: BrokerProcess,
) -> None:
    """Every acknowledged record is stored exactly once, in send order per partition."""
    topic = "crash"
    create_topic(disk_broker.bootstrap, topic, PARTITIONS)
    acked: dict[int, RecordMetadata] = {}
    failed: dict[int, BaseException] = {}
    lock = threading.Lock()
    restarted = threading.Event()

    def delivered(i: int):  # type: ignore[no-untyped-def]
        def callback(error: BaseException | None, md: RecordMetadata | None) -> None:
            with lock:
                if error is not None:
                    failed[i] = error
                else:
                    assert md is not None and i not in acked
                    acked[i] = md

        return callback

    def crash_and_restart() -> None:
        disk_broker.kill()
        disk_broker.start()
        restarted.set()

    crasher: threading.Thread | None = None
    with Producer(
        bootstrap_servers=disk_broker.bootstrap, batch_size=8192, linger_ms=2, retry_backoff_ms=20
    ) as producer:
        for i in range(RECORDS):
            key = b"key-%d" % (i % 11)
            producer.send(topic, b"%07d" % i, key=key, on_delivery=delivered(i))
            if crasher is None and i >= RECORDS // 3 and len(acked) > 1000:
                crasher = threading.Thread(target=crash_and_restart)
                crasher.start()
        producer.flush(120)
        metrics = producer.metrics()
    assert crasher is not None
    crasher.join()
    assert restarted.is_set()
    assert len(acked) + len(failed) == RECORDS
    assert metrics["retries"] > 0  # the crash did hit requests in flight
    # within delivery.timeout.ms the restart is invisible: nothing fails
    assert not failed, f"{len(failed)} failed: {set(map(repr, failed.values()))}"

    stored = read_back(disk_broker.bootstrap, topic, PARTITIONS, len(acked), timeout_s=60)
    values = [int(r.value or b"") for r in stored]
    assert len(values) == len(set(values)), "a record was stored twice"
    where = {(r.partition, r.offset): int(r.value or b"") for r in stored}
    for i, md in acked.items():
        assert md.partition == keyed_partition(b"key-%d" % (i % 11), PARTITIONS)
        assert where[(md.partition, md.offset)] == i
    per_partition: dict[int, list[int]] = defaultdict(list)
    for r in stored:
        per_partition[r.partition].append(int(r.value or b""))
    for partition, sent in per_partition.items():
        assert sent == sorted(sent), f"partition {partition} out of order"
