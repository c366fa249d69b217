"""Tests that need the in-process cluster: its faults, its clock and its read-outs.

``kafka_cluster`` is a fresh ``MemoryCluster`` per test; these tests do not
run under ``--kafka-bootstrap`` (a real broker has no remote control of faults
and time).
"""

from __future__ import annotations

from invoices import InvoiceService

from kafkette import Consumer, Producer, TopicPartition
from kafkette.errors import CoordinatorNotAvailableError, NotEnoughReplicasError


def test_lost_produce_answers_do_not_duplicate_invoices(kafka_cluster, kafka_topic):
    orders, invoices = kafka_topic(partitions=1), kafka_topic(partitions=1)
    with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as producer:
        for order in (b"1", b"2", b"3"):
            producer.send(orders, order).result(10)
    # The broker stores the next two Produce requests but their answers are lost, as
    # after a timeout: the producer retries, and the broker must see the duplicates.
    kafka_cluster.faults.drop_response("Produce", times=2)
    with InvoiceService(kafka_cluster.bootstrap_servers, orders, invoices) as service:
        service.run_until(3)
    stored = kafka_cluster.records(invoices, isolation="read_committed")
    assert [r.value for r in stored] == [b"invoice:1", b"invoice:2", b"invoice:3"]
    assert kafka_cluster.committed("invoicer") == {TopicPartition(orders, 0): 3}


def test_not_enough_replicas_is_retried(kafka_cluster, kafka_topic):
    orders = kafka_topic(partitions=1)
    kafka_cluster.faults.fail("Produce", NotEnoughReplicasError, times=3)
    with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as producer:
        assert producer.send(orders, b"1").result(10).offset == 0
    assert kafka_cluster.faults.armed() == []  # all three were answered with the error
    assert [r.value for r in kafka_cluster.records(orders)] == [b"1"]


def test_an_unavailable_coordinator_is_retried(kafka_cluster, kafka_topic):
    orders = kafka_topic(partitions=1)
    with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as producer:
        producer.send(orders, b"1").result(10)
    kafka_cluster.faults.fail("FindCoordinator", CoordinatorNotAvailableError, times=2)
    with Consumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        group_id="readers",
        auto_offset_reset="earliest",
    ) as consumer:
        consumer.subscribe([orders])
        records = {}
        while not records:
            records = consumer.poll(1.0)
        consumer.commit()
    assert [r.value for r in records[TopicPartition(orders, 0)]] == [b"1"]
    assert kafka_cluster.committed("readers") == {TopicPartition(orders, 0): 1}
    assert kafka_cluster.faults.armed() == []


def test_a_hung_transaction_is_aborted_when_its_timeout_passes(kafka_cluster, kafka_topic):
    invoices = kafka_topic(partitions=1)
    producer = Producer(
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        transactional_id="hung",
        transaction_timeout_ms=30_000,
    )
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(invoices, b"invoice:never").result(10)
    # The service hangs here: no commit, no abort. Broker time moves, no one sleeps.
    assert kafka_cluster.transactions() == {"hung": "Ongoing"}
    assert kafka_cluster.last_stable_offset(invoices, 0) == 0
    kafka_cluster.advance(29.0)
    assert kafka_cluster.transactions() == {"hung": "Ongoing"}
    kafka_cluster.advance(20.0)  # past the timeout, and the broker's next check of it
    assert kafka_cluster.transactions() == {"hung": "CompleteAbort"}
    assert kafka_cluster.last_stable_offset(invoices, 0) == 2  # the record and the abort marker
    assert kafka_cluster.records(invoices, isolation="read_committed") == []
    producer.close(timeout=1.0)
