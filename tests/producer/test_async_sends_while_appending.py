"""Under asyncio the async producer writes a full batch from within ``send`` itself.

A coroutine appending in a loop whose ``await send()`` never suspends gave the sender
no turn before ``flush``: the broker idled while the caller appended, then got every
request at once. ``Sender.news`` (the async producer's accumulator wake-up) now runs
the sender's pass inside that ``send`` while the sender's task sleeps, so full batches
go out while the caller appends, many in one write; their answers are read and handled
when the loop runs, as before.
Against ``kafkette serve --memory`` over TCP: the requests are written before the
caller's first loop turn, within ``max.in.flight.requests.per.connection``, and the
records, their order and offsets, and the delivery callbacks are as ever.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kafkette import AsyncProducer, RecordMetadata
from kafkette.producer.futures import RecordFuture
from kafkette.producer.sender import NEWS_WRITE
from tests.brokers import BrokerProcess, free_port, kafkette_broker
from tests.producer.helpers import DroppingProxy, create_topic, read_back

PARTITIONS = 2
RECORDS = 1_000
BATCH_SIZE = 16_384
T0 = 1_700_000_000_000
SETTINGS: dict[str, dict[str, Any]] = {
    "fast": {
        "acks": 1,
        "enable_idempotence": False,
        "max_in_flight_requests_per_connection": 10**6,
    },
    "one in flight": {
        "acks": 1,
        "enable_idempotence": False,
        "max_in_flight_requests_per_connection": 1,
    },
    "idempotent": {
        "acks": -1,
        "enable_idempotence": True,
        "max_in_flight_requests_per_connection": 5,
    },
}
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None)


def value(i: int) -> bytes:
    return b"%04d" % i * 250  # 1,000 bytes: 16 fill a batch


@pytest.mark.parametrize("name", SETTINGS)
def test_full_batches_are_written_while_the_caller_appends(
    broker: BrokerProcess, name: str
) -> None:
    settings = SETTINGS[name]
    topic = f"appending-{next(_topics)}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    delivered: list[tuple[BaseException | None, RecordMetadata | None, str]] = []

    def on_delivery(error: BaseException | None, metadata: RecordMetadata | None) -> None:
        delivered.append((error, metadata, threading.current_thread().name))

    async def main() -> tuple[list[RecordFuture], int, int]:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap,
            batch_size=BATCH_SIZE,
            linger_ms=60_000,
            **settings,
        ) as producer:
            for p in range(PARTITIONS):  # the topic's metadata, and the producer id
                await producer.send(topic, b"first", partition=p, timestamp=T0)
            await producer.flush()
            assert producer._core is not None
            sender = producer._core.sender
            drained = sender.metrics.batches_drained
            turns: list[int] = []
            asyncio.get_running_loop().call_soon(turns.append, 1)
            futures = [
                await producer.send(
                    topic,
                    value(i),
                    partition=i % PARTITIONS,
                    timestamp=T0 + i,
                    on_delivery=on_delivery,
                )
                for i in range(RECORDS)
            ]
            assert not turns  # the loop never ran: every send above returned at once
            in_flight = sender.in_flight
            written = sender.metrics.batches_drained - drained
            assert not delivered  # answers are handled when the loop runs
            await producer.flush()
            return futures, in_flight, written

    futures, in_flight, written = asyncio.run(main())
    limit = settings["max_in_flight_requests_per_connection"]
    # a request takes one batch of each partition ready
    if limit > 1_000:
        # a pass each time the batches opened since the last hold NEWS_WRITE bytes: the
        # full batches of the first such pass at least
        assert written >= NEWS_WRITE // BATCH_SIZE - PARTITIONS
        assert written / PARTITIONS <= in_flight <= written
    else:
        assert in_flight == limit
        assert limit <= written <= limit * PARTITIONS
    expected = [
        RecordMetadata(topic, i % PARTITIONS, 1 + i // PARTITIONS, T0 + i) for i in range(RECORDS)
    ]
    assert [f.result(0) for f in futures] == expected
    ours = sorted(delivered, key=lambda d: d[1].timestamp if d[1] else 0)
    assert ours == [(None, md, "MainThread") for md in expected]
    # each partition's callbacks in its records' order
    for p in range(PARTITIONS):
        offsets = [md.offset for _, md, _ in delivered if md is not None and md.partition == p]
        assert offsets == list(range(1, 1 + RECORDS // PARTITIONS))
    stored = read_back(broker.bootstrap, topic, PARTITIONS, RECORDS + PARTITIONS)
    assert [(r.partition, r.offset, r.value) for r in stored] == sorted(
        [(p, 0, b"first") for p in range(PARTITIONS)]
        + [(i % PARTITIONS, 1 + i // PARTITIONS, value(i)) for i in range(RECORDS)]
    )


def test_connections_cut_while_the_caller_appends_lose_nothing() -> None:
    """Idempotent (5 in flight), through a proxy whose connections are cut after each round
    of appends: the next round's sends write into the cut connection before the loop has
    seen it close. Every record is stored once, in order, the lost requests retried."""
    proxy_port = free_port()
    with BrokerProcess(args=("--advertised-listener", f"127.0.0.1:{proxy_port}")) as server:
        proxy = DroppingProxy(proxy_port, ("127.0.0.1", server.port))
        try:
            topic = f"appending-cut-{next(_topics)}"
            create_topic(server.bootstrap, topic, 1)

            async def main() -> tuple[list[RecordMetadata], float, int]:
                async with AsyncProducer(
                    bootstrap_servers=f"127.0.0.1:{proxy_port}", batch_size=2_000, linger_ms=60_000
                ) as producer:
                    assert producer._core is not None
                    metrics = producer._core.sender.metrics
                    futures: list[RecordFuture] = []
                    cut = 0
                    for round_ in range(4):
                        drained = metrics.batches_drained
                        for i in range(7_500):
                            number = round_ * 7_500 + i
                            futures.append(await producer.send(topic, b"%06d" % number * 16))
                        if round_:  # (the first waits for a producer id: the loop must run)
                            assert metrics.batches_drained > drained  # written by the sends
                        await producer.flush(60)
                        cut += proxy.drop_all()
                    return [await f for f in futures], metrics.retries, cut

            metadata, retries, cut = asyncio.run(main())
            assert cut >= 4 and proxy.accepted >= 4
            assert [md.offset for md in metadata] == list(range(30_000))
            stored = read_back(server.bootstrap, topic, 1, 30_000)
            assert [r.value for r in stored] == [b"%06d" % i * 16 for i in range(30_000)]
            assert retries > 0  # the requests written into a cut connection, retried unseen
        finally:
            proxy.close()
