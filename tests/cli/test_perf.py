"""``kafkette perf produce|consume`` against ``kafkette serve``: the counts of the
summary agree with the broker's end offsets; live lines when piped, one line
redrawn on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time

import pytest

from kafkette import AdminClient, TopicPartition
from kafkette.admin.types import OffsetSpec
from kafkette.cli import main
from kafkette.cli.perf import payload
from kafkette.testing import MemoryCluster
from tests.brokers import BrokerProcess
from tests.cli.cli import TIMEOUT_S, kafkette, ok
from tests.cli.records import create_topic, read_all

NUMBER = r"[0-9]+\.[0-9]+"
LATENCY = rf"latency ms p50 {NUMBER} p95 {NUMBER} p99 {NUMBER} max {NUMBER}"
SUMMARY_LATENCY = (
    rf"latency ms avg {NUMBER} p50 {NUMBER} p95 {NUMBER} p99 {NUMBER} p99\.9 {NUMBER} max {NUMBER}"
)


def live(verb: str) -> re.Pattern[str]:
    """A live line; "latency ms -" when no measured record completed in the interval."""
    return re.compile(
        rf"[0-9]+ records {verb}, {NUMBER} records/s \({NUMBER} MB/s\), "
        rf"({LATENCY}|latency ms -)"
    )


def summary(records: int, verb: str) -> re.Pattern[str]:
    return re.compile(
        rf"{records} records {verb} in ({NUMBER}) s, ({NUMBER}) records/s \(({NUMBER}) MB/s\), "
        + SUMMARY_LATENCY
    )


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        found = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST)).all()
    return [found[tp].offset for tp in tps]


def test_perf(memory_broker: BrokerProcess) -> None:
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "load", 2)
    # rate-limited, piped: plain live lines, then the summary and the end offsets
    produce = ("perf", "produce", "load", "--records", "5000", "--size", "100")
    out = ok(
        kafkette(
            *produce,
            *("--throughput", "10000", "--acks", "1", "-z", "lz4", "--interval", "0.1"),
            bootstrap=bootstrap,
        )
    )
    *progress, last, offsets = out.splitlines()
    assert len(progress) >= 2
    assert all(live("sent").fullmatch(line) for line in progress), progress
    match = summary(5000, "sent").fullmatch(last)
    assert match, last
    seconds, rate, mb = (float(g) for g in match.groups())
    assert seconds >= 0.45  # 5000 records at 10,000 a second
    assert abs(rate - 5000 / seconds) <= 0.02 * rate
    assert abs(mb - 5000 * 100 / seconds / 1e6) <= 0.02 * mb + 0.01
    assert offsets == "end offsets 0 -> 5000 (+5000) in 2 partitions"
    assert sum(end_offsets(bootstrap, "load", 2)) == 5000

    # one partition, JSON: progress objects, then the summary
    out = ok(
        kafkette(
            *("perf", "produce", "load", "--records", "1000", "--size", "10", "-p", "1"),
            *("--acks", "all", "--json"),
            bootstrap=bootstrap,
        )
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert all(line["type"] == "progress" for line in lines[:-1])
    final = lines[-1]
    assert final["type"] == "summary"
    assert (final["records"], final["bytes"]) == (1000, 10_000)
    ends = end_offsets(bootstrap, "load", 2)
    assert (final["end_offsets_before"], final["end_offsets_after"]) == (ends[1] - 1000, ends[1])
    assert sum(ends) == 6000
    for name in ("avg", "p50", "p95", "p99", "p99.9", "max"):
        assert 0 <= final[name] <= final["max"]

    # consume: every record to the end offsets, the values' bytes counted
    out = ok(kafkette("perf", "consume", "load", "--interval", "0.05", bootstrap=bootstrap))
    *progress, last, offsets = out.splitlines()
    assert all(live("read").fullmatch(line) for line in progress), progress
    assert summary(6000, "read").fullmatch(last), last
    assert offsets == "offsets 0 -> 6000 (+6000) in 2 partitions"
    out = ok(
        kafkette("perf", "consume", "load", "--records", "6000", "--json", bootstrap=bootstrap)
    )
    final = json.loads(out.splitlines()[-1])
    assert (final["records"], final["bytes"], final["offsets_read"]) == (6000, 510_000, 6000)


def test_perf_produce_unlimited_agrees_with_the_end_offsets(memory_broker: BrokerProcess) -> None:
    """Without --throughput (runs of plain sends, the latency of a few records measured):
    the summary's records and bytes, its end offsets and the broker's all agree, for a
    count that is not a whole number of runs."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "bulk", 3)
    out = ok(
        kafkette(
            *("perf", "produce", "bulk", "--records", "20003", "--size", "1024"),
            *("--acks", "1", "--json"),
            bootstrap=bootstrap,
        )
    )
    final = json.loads(out.splitlines()[-1])
    assert final["type"] == "summary"
    assert (final["records"], final["bytes"]) == (20003, 20003 * 1024)
    assert (final["end_offsets_before"], final["end_offsets_after"]) == (0, 20003)
    assert sum(end_offsets(bootstrap, "bulk", 3)) == 20003
    for name in ("avg", "p50", "p95", "p99", "p99.9"):
        assert 0 <= final[name] <= final["max"]


def test_perf_on_a_terminal(memory_broker: BrokerProcess) -> None:
    """On a terminal the live line is redrawn in place; the summary replaces it."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "tty", 1)
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "kafkette", "perf", "produce", "tty", "--records", "2000"]
    command += ["--throughput", "5000", "--interval", "0.1", "-b", bootstrap]
    process = subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(TIMEOUT_S) == 0
    assert process.stderr is not None
    with process.stderr:
        assert process.stderr.read() == b""
    screen = b"".join(chunks).decode().replace("\r\n", "\n")
    redrawn, _, rest = screen.rpartition("\r\x1b[K")
    drawn = redrawn.split("\r")
    assert drawn[0] == "" and len(drawn) >= 3, screen
    assert all(live("sent").fullmatch(line.removesuffix("\x1b[K")) for line in drawn[1:]), drawn
    last, offsets = rest.splitlines()
    assert summary(2000, "sent").fullmatch(last), last
    assert offsets == "end offsets 0 -> 2000 (+2000) in 1 partitions"


NOT_CREATED = (
    "kafkette perf produce: UNKNOWN_TOPIC_OR_PARTITION (3): This server does not host this "
    "topic-partition. (topic 'fresh' does not exist and the broker does not create topics "
    "on first use; create it with: kafkette topics create fresh)\n"
)


def test_perf_produce_creates_the_topic_on_first_use(memory_broker: BrokerProcess) -> None:
    """As ``kafkette produce``: a topic that does not exist is created by the broker
    (num.partitions=1) and then holds exactly the records sent."""
    bootstrap = memory_broker.bootstrap
    out = ok(
        kafkette(
            *("perf", "produce", "fresh", "--records", "300", "--size", "10", "--json"),
            bootstrap=bootstrap,
        )
    )
    final = json.loads(out.splitlines()[-1])
    assert (final["type"], final["records"]) == ("summary", 300)
    assert (final["end_offsets_before"], final["end_offsets_after"]) == (0, 300)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        assert len(admin.describe_topics(["fresh"]).all()["fresh"].partitions) == 1
    rows = read_all(bootstrap, "fresh")
    assert [(r[0], r[1], r[3]) for r in rows] == [(0, n, payload(10)) for n in range(300)]


def test_perf_produce_to_a_new_topic_in_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """memory:// (the broker core in this process): the topic is created on first use;
    with auto-creation off the command fails at once, naming the topic, and creates
    nothing (a producer alone would wait max.block.ms, 60 s)."""
    with MemoryCluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        assert main(["perf", "produce", "fresh", "--records", "250", "-b", bootstrap]) == 0
        assert capsys.readouterr().out.endswith("end offsets 0 -> 250 (+250) in 1 partitions\n")
        assert end_offsets(bootstrap, "fresh", 1) == [250]
        assert len(read_all(bootstrap, "fresh")) == 250
        # a partition the new topic does not have: at once, not after max.block.ms
        started = time.monotonic()
        assert main(["perf", "produce", "other", "--records", "9", "-p", "1", "-b", bootstrap]) == 1
        assert time.monotonic() - started < 10
        assert capsys.readouterr().err == (
            "kafkette perf produce: UNKNOWN_TOPIC_OR_PARTITION (3): This server does not host "
            "this topic-partition. (partition 1 of topic 'other': the topic was created with "
            "1 partition(s))\n"
        )
    with MemoryCluster(auto_create_topics_enable=False) as cluster:
        bootstrap = cluster.bootstrap_servers
        started = time.monotonic()
        assert main(["perf", "produce", "fresh", "--records", "250", "-b", bootstrap]) == 1
        assert time.monotonic() - started < 10
        assert capsys.readouterr() == ("", NOT_CREATED)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            assert admin.list_topics() == []


def test_perf_produce_without_auto_creation() -> None:
    """``kafkette serve`` with auto.create.topics.enable=false: a clear error at once."""
    with BrokerProcess(args=("--set", "auto.create.topics.enable=false")) as broker:
        started = time.monotonic()
        result = kafkette("perf", "produce", "fresh", "--records", "10", bootstrap=broker.bootstrap)
        assert time.monotonic() - started < 10
        assert (result.returncode, result.stdout, result.stderr) == (1, "", NOT_CREATED)
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            assert admin.list_topics() == []
