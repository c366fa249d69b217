"""Exactly once against ``kafkette serve``: task retries in Spark, and a zombie fenced.

The retries need a ``local[2,3]`` session, so they run in one driver
subprocess (``exactly_once_driver``) whose writer fails the first attempt of
every task of every micro-batch: partition 0 after its transaction committed,
partition 1 by killing its Python worker with its transaction open. Read with
read_committed, each input line is in the output exactly once; the control,
the same failures without exactly-once, writes lines twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafkette.errors import InvalidProducerEpochError, ProducerFencedError
from kafkette.spark_integration.exactly_once import (
    KafketteSession,
    Marker,
    PartitionOutcome,
    PartitionPlan,
    write_partition,
)
from tests.brokers import BrokerProcess
from tests.spark_integration.sink_helpers import create_topics, read_all

ROOT = Path(__file__).parents[2]
BATCHES = [[f"b{b}-r{r}" for r in range(6)] for b in range(2)]
DRIVER_TIMEOUT_S = 600


def values(bootstrap: str, topic: str) -> Counter[bytes | None]:
    return Counter(value for _, _, _, value, _ in read_all(bootstrap, 3, topic))


def test_task_retries_write_each_record_once(
    spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    jobs = {
        f"{unique_topic}-sink": "sink:{}:exactly",
        f"{unique_topic}-stream": "stream:{}:exactly",
        f"{unique_topic}-control": "sink:{}:at-least",
    }
    for topic in jobs:
        create_topics(spark_broker.bootstrap, 3, topic)
        (tmp_path / topic / "in").mkdir(parents=True)
        for n, lines in enumerate(BATCHES):
            path = tmp_path / topic / "in" / f"{n}.txt"
            path.write_text("".join(f"{x}\n" for x in lines))
            os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order
    command = [sys.executable, "-m", "tests.spark_integration.exactly_once_driver"]
    command += ["--bootstrap", spark_broker.bootstrap, "--work", str(tmp_path)]
    command += [job.format(topic) for topic, job in jobs.items()]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert done.stdout.splitlines() == [f"{job.format(t)} batches 2" for t, job in jobs.items()]

    # every first attempt of both partitions of both batches failed (and was retried)
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == sorted(
        f"{topic}-b{b}-p{p}" for topic in jobs for b in range(2) for p in range(2)
    )
    once = Counter(line.encode() for lines in BATCHES for line in lines)
    assert values(spark_broker.bootstrap, f"{unique_topic}-sink") == once
    assert values(spark_broker.bootstrap, f"{unique_topic}-stream") == once
    # the control: without transactions, the retried partitions are written twice
    control = values(spark_broker.bootstrap, f"{unique_topic}-control")
    assert set(control) == set(once)
    assert set(control.values()) == {2}


def test_a_zombie_attempts_late_commit_is_fenced(
    spark_broker: BrokerProcess, unique_topic: str
) -> None:
    """Attempt 1 stalls with its rows sent; attempt 2 fences it and commits; attempt 1's
    commit then fails and its rows never become visible."""
    create_topics(spark_broker.bootstrap, 3, unique_topic)
    settings = {"bootstrap.servers": spark_broker.bootstrap}
    transactional_id = f"{unique_topic}-txn-0"
    plan = PartitionPlan("query-1", 0, transactional_id)
    rows = [(unique_topic, f"r{i}".encode(), None, None, None, None) for i in range(5)]

    zombie = KafketteSession(settings, transactional_id, unique_topic)
    try:
        zombie.init_transactions()
        assert zombie.read_marker() is None
        zombie.begin()
        for row in rows:
            zombie.send(row)
        zombie._producer.flush()  # its rows are in the log, uncommitted

        retry = KafketteSession(settings, transactional_id, unique_topic)
        try:
            assert write_partition(retry, plan, rows) == PartitionOutcome(written=True, rows=5)
        finally:
            retry.close()

        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            zombie.commit(plan.marker(5))
    finally:
        zombie.close()

    assert values(spark_broker.bootstrap, unique_topic) == Counter(r[1] for r in rows)
    reader = KafketteSession(settings, transactional_id, unique_topic)
    assert reader.read_marker() == Marker("query-1", 0, 5)
    # a replay of the batch (a restart from the checkpoint) skips it
    again = KafketteSession(settings, transactional_id, unique_topic)
    try:
        assert write_partition(again, plan, rows) == PartitionOutcome(written=False, rows=0)
    finally:
        again.close()
    assert len(read_all(spark_broker.bootstrap, 3, unique_topic)) == 5
    # the zombie's rows are in the log, aborted
    uncommitted = read_all(spark_broker.bootstrap, 3, unique_topic, read_committed=False)
    assert Counter(v for *_, v, _ in uncommitted) == Counter(r[1] for r in rows * 2)


def test_a_marker_of_another_query_stops_the_write(
    spark_broker: BrokerProcess, unique_topic: str
) -> None:
    create_topics(spark_broker.bootstrap, 1, unique_topic)
    settings = {"bootstrap.servers": spark_broker.bootstrap}
    transactional_id = f"{unique_topic}-txn-0"
    rows = [(unique_topic, b"x", None, None, None, None)]
    first = KafketteSession(settings, transactional_id, unique_topic)
    try:
        write_partition(first, PartitionPlan("old-query", 4, transactional_id), rows)
    finally:
        first.close()
    second = KafketteSession(settings, transactional_id, unique_topic)
    try:
        with pytest.raises(Exception, match="was last used by streaming query old-query"):
            write_partition(second, PartitionPlan("new-query", 0, transactional_id), rows)
    finally:
        second.close()
    assert [v for *_, v, _ in read_all(spark_broker.bootstrap, 1, unique_topic)] == [b"x"]
