"""A sender that fails fails the producer loudly, never silently (#28).

Whatever stops the producer's sender (a codec that cannot run, a bug in
building a batch or in handling an answer, in the sender's own pass or in one
of its tasks) fails every record not yet acknowledged with that error, makes
later sends raise it, and lets ``flush`` and ``close`` end at once, as Java's
KafkaProducer after a fatal sender error. Before the fix the records waited
forever: ``seq 5 | kafkette produce t -z zstd`` hung without zstandard.

Each failure is injected with ``monkeypatch`` and checked for the sync and the
async producer (asyncio and trio), against ``memory://`` and ``kafkette serve``.
Records go to two topics with a long ``linger.ms``: all of them are queued
when ``flush`` makes the sender drain, so the one failure leaves other batches
drained and not yet built, or in flight.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
import pytest

from kafkette import AsyncProducer, Producer
from kafkette.client.connection import BrokerConnection
from kafkette.producer import accumulator as accumulator_module
from kafkette.producer.accumulator import ProducerBatch, RecordAccumulator
from kafkette.producer.futures import RecordFuture
from kafkette.producer.sender import Sender
from kafkette.protocol.errors import UnsupportedCompressionError
from kafkette.protocol.records import ZSTD, default_records
from tests.brokers import BrokerProcess, kafkette_broker

BOUND_S = 5.0
"""How long flush, a future or close may take once the sender failed."""

KINDS: dict[str, tuple[type[Exception], str, dict[str, Any]]] = {
    # where the failure is raised: its class, its message, the producer's settings
    "codec": (UnsupportedCompressionError, "zstd is unavailable in this test", {}),
    "build": (RuntimeError, "batch building broke", {}),
    "answer": (RuntimeError, "handling the answer broke", {"acks": "all"}),
    "answer-acks0": (RuntimeError, "handling the answer broke", {"acks": 0}),
    "group": (RuntimeError, "a task in the sender's group broke", {}),
}
"""codec: the zstd codec raises while a batch is built, in the sender's pass;
build: building a batch raises; answer: handling a Produce answer raises (in the
callback of a request written at once); answer-acks0: the same in one of the
sender's worker tasks (acks=0 requests go through them); group: a task that the
sender did not start itself fails in its task group (one started as a
connection's pump would be, by the sender's task as it wakes for the records
sent) while the requests of that pass wait for their answers."""

TOPICS = ("events", "audit")
RECORDS = 12


def inject(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Make the sender fail at the place ``kind`` names."""
    error_class, message, _ = KINDS[kind]

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error_class(message)

    if kind == "codec":
        real = default_records.compress

        def compress(codec: int, data: Any, **kwargs: Any) -> bytes:
            if codec == ZSTD:
                fail()
            return real(codec, data, **kwargs)

        monkeypatch.setattr(default_records, "compress", compress)
    elif kind == "build":
        monkeypatch.setattr(ProducerBatch, "build", fail)
        monkeypatch.setattr(accumulator_module, "_build_plain", None)  # build's C twin
    elif kind == "group":

        async def broken_task() -> None:
            fail()

        real_turn = Sender._turn
        real_begin_flush = RecordAccumulator.begin_flush
        flushing: list[bool] = []
        started: list[Sender] = []

        def begin_flush(accumulator: RecordAccumulator) -> Any:
            flushing.append(True)
            return real_begin_flush(accumulator)

        async def turn(sender: Sender, task_group: anyio.abc.TaskGroup) -> None:
            # the sender's task wakes for the flush of the records sent: a pump's start
            # there (not at an earlier wake, which would fail the sends themselves)
            if flushing and not started:
                started.append(sender)
                task_group.start_soon(broken_task)
            await real_turn(sender, task_group)

        def submit(connection: BrokerConnection, request: Any, on_response: Any) -> None:
            pass  # held, as if not answered yet: the failure comes first

        real_nudge = Sender.nudge

        def nudge(sender: Sender) -> None:
            # a sync producer's flush would run its pass in the loop's callback: the
            # sender's task wakes for it instead, as it does for an async producer's
            if flushing and not started:
                sender.wakeup()
            else:
                real_nudge(sender)

        monkeypatch.setattr(RecordAccumulator, "begin_flush", begin_flush)
        monkeypatch.setattr(Sender, "_turn", turn)
        monkeypatch.setattr(Sender, "nudge", nudge)
        monkeypatch.setattr(BrokerConnection, "submit", submit)
    else:
        monkeypatch.setattr(Sender, "_succeeded", fail)
        monkeypatch.setattr(Sender, "_succeeded_all", fail)


def settings(bootstrap: str, kind: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "compression_type": "zstd",
        "linger_ms": 60_000,  # nothing is drained before the flush
        **KINDS[kind][2],
    }


@pytest.fixture(params=["memory", "serve"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    """An in-process ``memory://`` cluster, or ``kafkette serve --memory``."""
    if request.param == "memory":
        yield f"memory://sender-failure-{uuid.uuid4().hex}"
    else:
        broker: BrokerProcess
        for broker in kafkette_broker(None):
            yield broker.bootstrap


def exactly(message: str) -> str:
    """A ``match=`` pattern of exactly ``message``."""
    return f"^{re.escape(message)}$"


def records() -> Iterator[tuple[str, bytes, bytes]]:
    """(topic, key, value) of the records each test sends."""
    for i in range(RECORDS):
        yield TOPICS[i % len(TOPICS)], f"k{i}".encode(), f"v{i}".encode()


def check_failed(futures: list[RecordFuture], error_class: type[Exception], message: str) -> None:
    """Every future failed with the sender's error, within the bound."""
    assert len(futures) == RECORDS
    for future in futures:
        error = future.exception(timeout=BOUND_S)
        assert type(error) is error_class, error
        assert str(error) == message


@pytest.mark.parametrize("kind", list(KINDS))
def test_sync_producer_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, bootstrap: str, kind: str
) -> None:
    error_class, message, _ = KINDS[kind]
    producer = Producer(settings(bootstrap, kind))
    try:
        for topic in TOPICS:  # the topics' metadata, before the failure is armed
            producer.send(topic, b"warm-up", partition=0)
            producer.flush(timeout=BOUND_S)
        inject(monkeypatch, kind)
        futures = [producer.send(topic, value, key=key) for topic, key, value in records()]
        assert not any(f.done() for f in futures)

        started = time.monotonic()
        with pytest.raises(error_class, match=exactly(message)):
            producer.flush(timeout=BOUND_S)
        assert time.monotonic() - started < BOUND_S
        check_failed(futures, error_class, message)
        with pytest.raises(error_class, match=exactly(message)):
            producer.send(TOPICS[0], b"later")
        with pytest.raises(error_class, match=exactly(message)):
            producer.send(TOPICS[1], b"later", key=b"k", headers={"h": b"1"}, partition=0)
        with pytest.raises(error_class, match=exactly(message)):
            producer.flush()
    finally:
        closer = threading.Thread(target=producer.close)
        started = time.monotonic()
        closer.start()
        closer.join(BOUND_S)
    assert not closer.is_alive(), "close hung"


async def _send_all(producer: AsyncProducer) -> list[RecordFuture]:
    return [await producer.send(topic, value, key=key) for topic, key, value in records()]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(KINDS))
async def test_async_producer_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, bootstrap: str, kind: str
) -> None:
    error_class, message, _ = KINDS[kind]
    with anyio.fail_after(4 * BOUND_S):  # close included
        async with AsyncProducer(settings(bootstrap, kind)) as producer:
            for topic in TOPICS:  # the topics' metadata, before the failure is armed
                await producer.send(topic, b"warm-up", partition=0)
                with anyio.fail_after(BOUND_S):
                    await producer.flush()
            inject(monkeypatch, kind)
            futures = await _send_all(producer)
            assert not any(f.done() for f in futures)

            with anyio.fail_after(BOUND_S):
                with pytest.raises(error_class, match=exactly(message)):
                    await producer.flush()
            for future in futures:
                with pytest.raises(error_class, match=exactly(message)):
                    await future  # done already: flush ended
            check_failed(futures, error_class, message)
            with pytest.raises(error_class, match=exactly(message)):
                await producer.send(TOPICS[0], b"later")
            with pytest.raises(error_class, match=exactly(message)):
                await producer.send(TOPICS[1], b"later", key=b"k", headers={"h": b"1"}, partition=0)
            with pytest.raises(error_class, match=exactly(message)):
                await producer.flush()
            closing = time.monotonic()
    assert time.monotonic() - closing < BOUND_S


@pytest.mark.anyio
async def test_async_send_and_wait_raises_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A send_and_wait without a timeout ends with the error, on a producer that
    flushes nothing: the sender fails as its linger runs out."""
    inject(monkeypatch, "build")
    async with AsyncProducer(bootstrap_servers=f"memory://{uuid.uuid4().hex}") as producer:
        with anyio.fail_after(BOUND_S):
            with pytest.raises(RuntimeError, match=exactly("batch building broke")):
                await producer.send_and_wait("t", b"v")
        with pytest.raises(RuntimeError, match=exactly("batch building broke")):
            await producer.send("t", b"v")


def test_sync_failure_reaches_delivery_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """on_delivery callbacks get the sender's error, once each."""
    inject(monkeypatch, "build")
    got: list[tuple[type[BaseException] | None, str]] = []
    done = threading.Event()

    def on_delivery(error: BaseException | None, metadata: object) -> None:
        got.append((type(error) if error is not None else None, str(error)))
        if len(got) == 3:
            done.set()

    with Producer(bootstrap_servers=f"memory://{uuid.uuid4().hex}") as producer:
        for i in range(3):
            producer.send("t", f"v{i}".encode(), on_delivery=on_delivery)
        assert done.wait(BOUND_S)
    assert got == [(RuntimeError, "batch building broke")] * 3


def test_sync_transaction_ends_with_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit whose records the sender fails on raises that error; the transaction
    can only be closed then."""
    inject(monkeypatch, "build")
    producer = Producer(
        bootstrap_servers=f"memory://{uuid.uuid4().hex}",
        transactional_id="failing",
        linger_ms=60_000,
    )
    try:
        producer.init_transactions(timeout=BOUND_S)
        producer.begin_transaction()
        futures = [producer.send("t", f"v{i}".encode()) for i in range(3)]
        with pytest.raises(RuntimeError, match=exactly("batch building broke")):
            producer.commit_transaction(timeout=BOUND_S)
        for future in futures:
            error = future.exception(timeout=0)
            assert (type(error), str(error)) == (RuntimeError, "batch building broke")
        for call in (
            lambda: producer.send("t", b"later"),
            producer.begin_transaction,
            lambda: producer.abort_transaction(timeout=BOUND_S),
            lambda: producer.commit_transaction(timeout=BOUND_S),
        ):
            with pytest.raises(RuntimeError, match=exactly("batch building broke")):
                call()
    finally:
        closer = threading.Thread(target=producer.close)
        closer.start()
        closer.join(BOUND_S)
    assert not closer.is_alive(), "close hung"


@pytest.mark.anyio
async def test_async_transaction_ends_with_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    inject(monkeypatch, "codec")
    with anyio.fail_after(4 * BOUND_S):  # close included
        async with AsyncProducer(
            bootstrap_servers=f"memory://{uuid.uuid4().hex}",
            transactional_id="failing",
            compression_type="zstd",
            linger_ms=60_000,
        ) as producer:
            await producer.init_transactions(timeout=BOUND_S)
            producer.begin_transaction()
            futures = [await producer.send("t", f"v{i}".encode()) for i in range(3)]
            message = KINDS["codec"][1]
            with pytest.raises(UnsupportedCompressionError, match=exactly(message)):
                await producer.commit_transaction(timeout=BOUND_S)
            for future in futures:
                with pytest.raises(UnsupportedCompressionError, match=exactly(message)):
                    await future
            with pytest.raises(UnsupportedCompressionError, match=exactly(message)):
                await producer.send("t", b"later")
            with pytest.raises(UnsupportedCompressionError, match=exactly(message)):
                producer.begin_transaction()
            with pytest.raises(UnsupportedCompressionError, match=exactly(message)):
                await producer.abort_transaction(timeout=BOUND_S)
