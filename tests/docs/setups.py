"""The states the docs' examples assume, made by the test before them.

A document names one with ``<!-- test-setup: NAME -->`` (an HTML comment: not
shown) before the examples that need it; the state holds until the next
set-up, which first undoes what this one left open. Each set-up starts from a
broker without topics or groups, so that an example's output does not depend on
the sections before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import ShareConsumer

from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.brokers import BrokerProcess
from tests.docs.context import DocContext
from tests.security.servers import Pki

Setup = Callable[[DocContext], None]
SETUPS: dict[str, Setup] = {}

NOV_2023 = 1_700_000_000_000
"""Epoch milliseconds of 2023-11-14T22:13:20Z, the start the docs' ``s@`` offsets name."""


def setup(function: Setup) -> Setup:
    SETUPS[function.__name__] = function
    return function


def empty_broker(servers: str) -> None:
    """Delete every topic and group (not the internal topics)."""
    with AdminClient(bootstrap_servers=servers) as admin:
        topics = admin.list_topics()
        if topics:
            admin.delete_topics(topics).all()
        groups = [listing.group_id for listing in admin.list_groups().all()]
        if groups:
            admin.delete_consumer_groups(groups).all()


def create(servers: str, topic: str, partitions: int, **configs: str) -> None:
    with AdminClient(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(topic, partitions, configs=configs)]).all()


@setup
def files_to_produce(docs: DocContext) -> None:
    """No topics (``produce`` creates them); the files docs/cli.md's produce reads."""
    empty_broker(docs.servers)
    (docs.work / "photo.jpg").write_bytes(bytes(range(256)) * 16)
    (docs.work / "batch.txt").write_text("payment 1\npayment 2\npayment 3\n")


@setup
def no_topics(docs: DocContext) -> None:
    empty_broker(docs.servers)


@setup
def orders(docs: DocContext) -> None:
    """Topic orders, 2 partitions: 12 records keyed customer-0..2 with a header, the first
    six an hour after :data:`NOV_2023` every 10 minutes, the others now."""
    empty_broker(docs.servers)
    create(docs.servers, "orders", 2)
    with Producer(bootstrap_servers=docs.servers) as producer:
        for i in range(12):
            producer.send(
                "orders",
                f"order {i}".encode(),
                key=f"customer-{i % 3}".encode(),
                headers=[("source", b"web")],
                timestamp=NOV_2023 + i * 600_000 if i < 6 else None,
            )
        producer.flush(30)


@setup
def orders_described(docs: DocContext) -> None:
    """Topic orders as docs/cli.md's ``topics describe`` shows it: 2 partitions with 3
    and 2 records, retention.ms=120000."""
    empty_broker(docs.servers)
    create(docs.servers, "orders", 2, **{"retention.ms": "120000"})
    with Producer(bootstrap_servers=docs.servers) as producer:
        for partition, count in ((0, 3), (1, 2)):
            for i in range(count):
                producer.send("orders", f"order {i}".encode(), partition=partition)
        producer.flush(30)


@setup
def billing_committed(docs: DocContext) -> None:
    """:func:`orders`, and group billing (no members) having committed both partitions
    to their ends."""
    orders(docs)
    partitions = [TopicPartition("orders", p) for p in range(2)]
    with Consumer(bootstrap_servers=docs.servers, group_id="billing") as consumer:
        consumer.commit(consumer.end_offsets(partitions))


@setup
def workers_share_group(docs: DocContext) -> None:
    """Topic jobs (1 partition, 3 records) and share group workers (no members) that
    accepted all three: its start offset is 3. confluent-kafka's ShareConsumer reads."""
    empty_broker(docs.servers)
    create(docs.servers, "jobs", 1)
    jobs = TopicPartition("jobs", 0)
    member = ShareConsumer({"bootstrap.servers": docs.servers, "group.id": "workers"})
    try:
        member.subscribe(["jobs"])
        deadline = time.monotonic() + 30
        with AdminClient(bootstrap_servers=docs.servers) as admin:
            while admin.list_share_group_offsets("workers", [jobs]).all()[jobs] is None:
                assert time.monotonic() < deadline, "the share partition never started"
                member.poll(0.2)
        with Producer(bootstrap_servers=docs.servers) as producer:
            for n in range(3):
                producer.send("jobs", f"job-{n}".encode())
        taken = 0
        while taken < 3:
            assert time.monotonic() < deadline, f"{taken} of 3 jobs delivered"
            taken += len(member.poll(0.2))
        member.commit_sync(10)
    finally:
        member.close()


@setup
def loader_open(docs: DocContext) -> None:
    """docs/cli.md's transaction that hangs: on a new broker, orders-0 holds 1500 records
    written by producers 0 to 3, then transactional id loader (producer 4, epoch 0) has
    a transaction open on orders-0 (from offset 1500) and orders-1."""
    servers = docs.fresh_broker()
    create(servers, "orders", 2)
    for _ in range(4):
        with Producer(bootstrap_servers=servers) as producer:
            for i in range(375):
                producer.send("orders", f"order {i}".encode(), partition=0)
            producer.flush(30)
    loader = Producer(bootstrap_servers=servers, transactional_id="loader")
    docs.later(loader.close)
    loader.init_transactions()
    loader.begin_transaction()
    for partition in (0, 1):
        loader.send("orders", b"payment", partition=partition).result(30)
    with AdminClient(bootstrap_servers=servers) as admin:
        [state] = admin.describe_producers([TopicPartition("orders", 1)]).all()[
            TopicPartition("orders", 1)
        ]
    assert (state.producer_id, state.current_transaction_start_offset) == (4, 0), state


@setup
def orders_in_4_partitions(docs: DocContext) -> None:
    """Topic orders, 4 partitions, each with a record of an idempotent producer."""
    empty_broker(docs.servers)
    create(docs.servers, "orders", 4)
    with Producer(bootstrap_servers=docs.servers) as producer:
        for partition in range(4):
            producer.send("orders", b"order", partition=partition)
        producer.flush(30)


@setup
def stopped_data_dir(docs: DocContext) -> None:
    """A data directory of a stopped ``kafkette serve``, with topic orders (two records
    on partition 0), standing for the docs' /var/lib/kafkette."""
    data_dir = docs.work / "var-lib-kafkette"
    with BrokerProcess(data_dir) as broker:
        create(broker.bootstrap, "orders", 1)
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for key, value in ((b"k1", b"v1"), (b"k2", b"v2")):
                producer.send("orders", value, key=key)
            producer.flush(30)
    docs.replacements["/var/lib/kafkette"] = str(data_dir)


@setup
def tls_files(docs: DocContext) -> None:
    """The files docs/security.md's listeners example names: server.pem and server.key
    (a test CA's certificate for 127.0.0.1), users.txt."""
    Pki(docs.work)
    (docs.work / "users.txt").write_text("# NAME:PASSWORD\nadmin:admin-secret\n")
