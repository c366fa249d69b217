"""Tests that run unchanged on memory://, `kafkette serve` and a real Kafka cluster.

They use only the plugin's portable fixtures (``kafka_bootstrap_servers``,
``kafka_topic``, ``kafka_admin``): ``pytest examples/testing/test_invoices.py``
runs them in process, and with ``--kafka-bootstrap HOST:PORT`` against a broker.
"""

from __future__ import annotations

import time

from helpers import read_all
from invoices import InvoiceService

from kafkette import AdminClient, Consumer, Producer, TopicPartition


def test_orders_of_one_customer_share_a_partition_in_order(kafka_bootstrap_servers, kafka_topic):
    orders = kafka_topic(partitions=3)
    with Producer(bootstrap_servers=kafka_bootstrap_servers) as producer:
        sent = [producer.send(orders, f"o{i}".encode(), key=b"customer-7") for i in range(5)]
        placed = [future.result(10) for future in sent]
    assert {m.partition for m in placed} == {placed[0].partition}
    assert [m.offset for m in placed] == [0, 1, 2, 3, 4]
    stored = read_all(kafka_bootstrap_servers, orders, 3)
    assert [(r.partition, r.key, r.value) for r in stored] == [
        (placed[0].partition, b"customer-7", f"o{i}".encode()) for i in range(5)
    ]


def test_each_order_is_invoiced_once(kafka_bootstrap_servers, kafka_topic, kafka_admin):
    orders, invoices = kafka_topic(partitions=2), kafka_topic(partitions=2)
    with Producer(bootstrap_servers=kafka_bootstrap_servers) as producer:
        for customer, order in [(b"ann", b"1"), (b"bob", b"2"), (b"ann", b"3")]:
            producer.send(orders, order, key=customer).result(10)
    with InvoiceService(kafka_bootstrap_servers, orders, invoices, group="once") as service:
        service.run_until(3)
    invoiced = read_all(kafka_bootstrap_servers, invoices, 2)
    assert sorted((r.key, r.value) for r in invoiced) == [
        (b"ann", b"invoice:1"),
        (b"ann", b"invoice:3"),
        (b"bob", b"invoice:2"),
    ]
    committed = kafka_admin.list_consumer_group_offsets("once").all()
    placed = read_all(kafka_bootstrap_servers, orders, 2)
    ends = {r.partition: r.offset + 1 for r in placed}  # in offset order: the last one wins
    assert {tp.partition: meta.offset for tp, meta in committed.items() if meta} == ends


def test_a_restarted_service_resumes_after_its_last_commit(kafka_bootstrap_servers, kafka_topic):
    orders, invoices = kafka_topic(partitions=1), kafka_topic(partitions=1)
    with Producer(bootstrap_servers=kafka_bootstrap_servers) as producer:
        for order in (b"1", b"2"):
            producer.send(orders, order).result(10)
        with InvoiceService(kafka_bootstrap_servers, orders, invoices, group="restart") as first:
            first.run_until(2)
        producer.send(orders, b"3").result(10)
    with InvoiceService(kafka_bootstrap_servers, orders, invoices, group="restart") as second:
        second.run_until(1)
    assert [r.value for r in read_all(kafka_bootstrap_servers, invoices, 1)] == [
        b"invoice:1",
        b"invoice:2",
        b"invoice:3",
    ]


def test_aborted_invoices_are_never_read(kafka_bootstrap_servers, kafka_topic):
    invoices = kafka_topic(partitions=1)
    servers = kafka_bootstrap_servers
    with Producer(bootstrap_servers=servers, transactional_id="aborter") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(invoices, b"invoice:wrong").result(10)  # stored, then aborted
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(invoices, b"invoice:right")
        producer.commit_transaction()
    committed = read_all(kafka_bootstrap_servers, invoices, 1)
    assert [(r.offset, r.value) for r in committed] == [(2, b"invoice:right")]
    everything = read_all(kafka_bootstrap_servers, invoices, 1, isolation_level="read_uncommitted")
    assert [r.value for r in everything] == [b"invoice:wrong", b"invoice:right"]


def test_orders_are_found_by_time(kafka_bootstrap_servers, kafka_topic):
    orders = kafka_topic(partitions=1)
    base = int(time.time() * 1000) - 60_000
    with Producer(bootstrap_servers=kafka_bootstrap_servers) as producer:
        for i in range(4):
            producer.send(orders, f"o{i}".encode(), timestamp=base + 1000 * i).result(10)
    tp = TopicPartition(orders, 0)
    with Consumer(bootstrap_servers=kafka_bootstrap_servers) as consumer:
        found = consumer.offsets_for_times({tp: base + 1500}, timeout=10.0)
        assert (found[tp].offset, found[tp].timestamp) == (2, base + 2000)
        assert consumer.offsets_for_times({tp: base + 5000}, timeout=10.0) == {tp: None}


def test_topics_are_made_as_asked(kafka_admin: AdminClient, kafka_topic):
    compacted = kafka_topic(partitions=2, cleanup_policy="compact")
    described = kafka_admin.describe_topics([compacted]).all()[compacted]
    assert [p.partition for p in described.partitions] == [0, 1]
