"""The endpoint's figures for a known workload, exactly: records and bytes in, bytes out per
topic, requests, log sizes and end offsets, a group's members, committed offsets and lag,
open transactions; on memory and disk storage (the in-process transport reaches the same
request path as TCP)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette import AdminClient, Consumer, NewTopic, Producer
from kafkette.client.inprocess import InProcessCluster, close_cluster, get_cluster
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster
from tests.server.metrics.scrape import by_label, samples, value

VALUE_SIZES = [1, 10, 63, 64, 100, 200, 1000, 5, 0, 300]
"""One record each, alternating partitions 0 and 1; sizes that cross varint widths."""


def varint_size(n: int) -> int:
    """Bytes of a zigzag varint (record fields, as the v2 format writes them)."""
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def batch_size(value_size: int) -> int:
    """A v2 batch of one keyless record, no headers, uncompressed: the 61-byte batch
    header, then the record (length, attributes, timestamp and offset deltas 0, key -1,
    value, 0 headers)."""
    body = 1 + 1 + 1 + varint_size(-1) + varint_size(value_size) + value_size + 1
    return 61 + varint_size(body) + body


@pytest.fixture(params=["memory", "disk"])
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, InProcessCluster]]:
    url = (
        f"memory://metrics-{uuid.uuid4().hex[:8]}"
        if request.param == "memory"
        else f"file://{tmp_path}"
    )
    found = get_cluster(url)
    try:
        yield url, found
    finally:
        close_cluster(url)


def test_a_known_workload_gives_exact_figures(cluster: tuple[str, InProcessCluster]) -> None:
    url, core = cluster
    with AdminClient(bootstrap_servers=url) as admin:
        admin.create_topics([NewTopic("orders", 2)]).all()
    with Producer(bootstrap_servers=url) as producer:
        for i, size in enumerate(VALUE_SIZES):
            producer.send("orders", b"x" * size, partition=i % 2)
            producer.flush()  # one batch, one Produce request per record
    expected = {p: [batch_size(s) for s in VALUE_SIZES[p::2]] for p in (0, 1)}
    total = sum(map(sum, expected.values()))
    with Consumer(
        bootstrap_servers=url,
        group_id="billing",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        consumer.subscribe(["orders"])
        seen = 0
        while seen < len(VALUE_SIZES):
            seen += sum(map(len, consumer.poll(timeout_ms=1000).values()))
        # Committed partly: 2 of partition 0's five records, 4 of partition 1's.
        consumer.commit({TopicPartition("orders", 0): 2, TopicPartition("orders", 1): 4})
        during = samples(core.run(core.broker.metrics.text))
    after = samples(core.run(core.broker.metrics.text))

    for scraped in (during, after):
        assert value(scraped, "kafkette_topic_records_in_total", topic="orders") == 10
        assert value(scraped, "kafkette_topic_bytes_in_total", topic="orders") == total
        assert value(scraped, "kafkette_topic_bytes_out_total", topic="orders") == total
        sizes = by_label(scraped, "kafkette_log_size_bytes", "partition", topic="orders")
        assert sizes == {"0": sum(expected[0]), "1": sum(expected[1])}
        ends = by_label(scraped, "kafkette_log_end_offset", "partition", topic="orders")
        assert ends == {"0": 5, "1": 5}
        committed = by_label(
            scraped, "kafkette_consumer_group_committed_offset", "partition", group="billing"
        )
        assert committed == {"0": 2, "1": 4}
        lag = by_label(scraped, "kafkette_consumer_group_lag", "partition", group="billing")
        assert lag == {"0": 3, "1": 1}
        produce = by_label(scraped, "kafkette_requests_total", "api")["Produce"]
        assert produce == 10
        assert by_label(scraped, "kafkette_requests_total", "api")["OffsetCommit"] == 1
        assert value(scraped, "kafkette_open_transactions", state="Ongoing") == 0
    members = by_label(during, "kafkette_consumer_group_members", "group", type="classic")
    assert members["billing"] == 1
    after_members = by_label(after, "kafkette_consumer_group_members", "group", type="classic")
    assert after_members["billing"] == 0
    # Every Produce request is in the latency histogram, in some bucket.
    counts = by_label(during, "kafkette_request_duration_seconds_count", "api")
    assert counts["Produce"] == 10
    infinite = by_label(during, "kafkette_request_duration_seconds_bucket", "api", le="+Inf")
    assert infinite["Produce"] == 10


def test_an_open_transaction_shows_until_committed() -> None:
    """Ongoing while the producer's transaction is open, then none; the commit marker the
    coordinator writes is in the log's end offset but not counted as a record in."""
    url = f"memory://metrics-{uuid.uuid4().hex[:8]}"
    core = get_cluster(url)
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic("t", 1)]).all()
        with Producer(bootstrap_servers=url, transactional_id="tx") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("t", b"abc")
            producer.flush()
            scraped = samples(core.run(core.broker.metrics.text))
            assert value(scraped, "kafkette_open_transactions", state="Ongoing") == 1
            producer.commit_transaction()
        scraped = samples(core.run(core.broker.metrics.text))
        assert value(scraped, "kafkette_open_transactions", state="Ongoing") == 0
        assert value(scraped, "kafkette_topic_records_in_total", topic="t") == 1
        assert value(scraped, "kafkette_log_end_offset", topic="t", partition="0") == 2
    finally:
        close_cluster(url)


def test_memory_cluster_shows_the_same_figures_without_http() -> None:
    with MemoryCluster() as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send("auto", b"12345", partition=0)
        scraped = samples(cluster.metrics_text())
    assert value(scraped, "kafkette_topic_records_in_total", topic="auto") == 1
    assert value(scraped, "kafkette_topic_bytes_in_total", topic="auto") == batch_size(5)


def test_a_consumer_protocol_group_shows_its_members_and_lag() -> None:
    """A KIP-848 group: its members under type="consumer", its committed offsets and lag."""
    with MemoryCluster() as cluster:
        url = cluster.bootstrap_servers
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic("events", 1)]).all()
        with Producer(bootstrap_servers=url) as producer:
            for i in range(7):
                producer.send("events", b"%d" % i, partition=0)
        with Consumer(
            bootstrap_servers=url,
            group_id="kip848",
            group_protocol="consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as consumer:
            consumer.subscribe(["events"])
            seen = 0
            while seen < 7:
                seen += sum(map(len, consumer.poll(timeout_ms=1000).values()))
            consumer.commit({TopicPartition("events", 0): 5})
            scraped = samples(cluster.metrics_text())
    members = by_label(scraped, "kafkette_consumer_group_members", "group", type="consumer")
    assert members == {"kip848": 1}
    assert "kip848" not in by_label(
        scraped, "kafkette_consumer_group_members", "group", type="classic"
    )
    assert (
        value(scraped, "kafkette_consumer_group_lag", group="kip848", topic="events", partition="0")
        == 2
    )
