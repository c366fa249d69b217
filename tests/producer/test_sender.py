"""The sender against a scripted broker: retries, leader hints, sequences, epoch bumps.

The fake client answers Produce requests from a small in-test broker that
checks sequences the way Kafka does (next expected sequence, duplicates of
recent batches), so exactly-once and ordering can be checked under injected
faults without sockets. Every test runs twice: with requests sent from the
sender's worker tasks (``KafkaClient.send``, as under trio and in-process)
and written at once with ``BrokerConnection.submit`` (TCP under asyncio).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import pytest
import sniffio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.client.config import ProducerConfig
from kafkette.client.metadata import (
    BrokerInfo,
    ClusterMetadata,
    MetadataCache,
    PartitionInfo,
    TopicInfo,
)
from kafkette.clocks import monotonic_ms
from kafkette.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
)
from kafkette.producer.accumulator import RECORD_OVERHEAD, RecordAccumulator
from kafkette.producer.futures import RecordFuture
from kafkette.producer.sender import LINGER_HOLD_IN_FLIGHT, NEWS_WRITE, Sender
from kafkette.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.messages.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.records import RecordBatch

TOPIC = "t"


def snapshot(leader: int = 1, partitions: int = 1) -> ClusterMetadata:
    return ClusterMetadata(
        "cluster",
        1,
        {1: BrokerInfo(1, "h1", 1), 2: BrokerInfo(2, "h2", 2)},
        {
            TOPIC: TopicInfo(
                TOPIC,
                uuid.UUID(int=1),
                tuple(PartitionInfo(TOPIC, p, leader, 0, (1,), (1,)) for p in range(partitions)),
            )
        },
    )


class FakeBroker:
    """Stores batches per partition and checks producer sequences like Kafka."""

    def __init__(self) -> None:
        self.log: dict[int, list[bytes | None]] = {}
        self.next_seq: dict[tuple[int, int, int], int] = {}  # (pid, epoch, partition) -> seq
        self.recent: dict[tuple[int, int, int, int], int] = {}  # (pid, epoch, p, seq) -> offset

    def append(self, partition: int, data: bytes) -> PartitionProduceResponse:
        batch = RecordBatch.from_buffer(data)
        h = batch.header
        log = self.log.setdefault(partition, [])
        if h.producer_id >= 0:
            key = (h.producer_id, h.producer_epoch, partition)
            expected = self.next_seq.get(key, 0)
            if h.base_sequence < expected:
                offset = self.recent.get((*key, h.base_sequence))
                if offset is None:
                    return PartitionProduceResponse(partition, OutOfOrderSequenceNumberError.code)
                return PartitionProduceResponse(partition, 0, offset)
            if h.base_sequence > expected:
                return PartitionProduceResponse(partition, OutOfOrderSequenceNumberError.code)
            self.next_seq[key] = expected + len(batch)
            self.recent[(*key, h.base_sequence)] = len(log)
        base = len(log)
        log.extend(r.value for r in batch)
        return PartitionProduceResponse(partition, 0, base)


Handler = Callable[[int, ProduceRequest], Awaitable[ProduceResponse]]


class FakeConnection:
    def __init__(self, client: FakeClient, init_version: int) -> None:
        self.client = client
        self.init_version = init_version

    def version_for(self, request: Any, maximum: int | None = None) -> int:
        return self.init_version

    async def request(self, request: Any, *, version: int | None = None) -> InitProducerIdResponse:
        assert isinstance(request, InitProducerIdRequest)
        self.client.init_requests.append((version or 0, request))
        if request.producer_id >= 0:
            return InitProducerIdResponse(
                producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1
            )
        self.client.next_pid += 1
        return InitProducerIdResponse(producer_id=self.client.next_pid, producer_epoch=0)


class FakeSubmitConnection:
    """A connection that takes requests with ``submit``, answered by the client's handler."""

    can_submit = True
    behind = False

    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        pass  # answered by tasks of the client's own

    def throttle_delay_ms(self) -> float:
        return 0.0  # (never throttled)

    def cork(self) -> None:
        assert self.client.corked is None
        self.client.corked = []

    def uncork(self) -> None:
        assert self.client.corked is not None
        self.client.writes.append(self.client.corked)
        self.client.corked = None

    def submit(self, request: Any, on_response: Callable[[Any, Any], object]) -> None:
        client = self.client
        assert client.corked is not None  # the sender writes its requests together
        client.corked.append(len(client.requests))
        client.record(self.node, request)
        assert client.task_group is not None
        # answered one after another, in the order sent, as a broker connection does
        previous, client.last_answered = client.last_answered, anyio.Event()
        client.task_group.start_soon(
            self._answer, request, on_response, previous, client.last_answered
        )

    async def _answer(
        self,
        request: Any,
        on_response: Callable[[Any, Any], object],
        previous: anyio.Event | None,
        answered: anyio.Event,
    ) -> None:
        if previous is not None:
            await previous.wait()
        try:
            response = await self.client.handler(self.node, request)
        except Exception as exc:
            on_response(None, exc)
        else:
            on_response(response, None)
        finally:
            answered.set()


class FakeClient:
    """What the sender needs of KafkaClient, answering from a handler."""

    submitting = False
    """Whether produce requests go through ``open_connection(...).submit`` (set by a fixture)."""

    def __init__(self, handler: Handler, *, init_version: int = 4, partitions: int = 1) -> None:
        self.handler = handler
        self.metadata = MetadataCache(300_000)
        self.metadata.update(snapshot(partitions=partitions), monotonic_ms())
        self.metadata.wanted_topics.add(TOPIC)
        self.requests: list[tuple[int, ProduceRequest]] = []
        self.init_requests: list[tuple[int, InitProducerIdRequest]] = []
        self.next_pid = 1000
        self.refreshes = 0
        self._connection = FakeConnection(self, init_version)
        self._partitions = partitions
        self.task_group: anyio.abc.TaskGroup | None = None
        self.last_answered: anyio.Event | None = None
        self.corked: list[int] | None = None
        self.writes: list[list[int]] = []  # submit: the requests (indexes) written together

    def record(self, node: int, request: Any) -> None:
        assert isinstance(request, ProduceRequest)
        for topic in request.topic_data:
            for p in topic.partition_data:  # as sent: a retry may restamp the batch later
                p.records = bytes(p.records or b"")
        self.requests.append((node, request))

    async def send(self, node: int, request: Any, *, expect_response: bool = True) -> Any:
        assert not self.submitting
        self.record(node, request)
        return await self.handler(node, request)

    def open_connection(self, node: int) -> FakeSubmitConnection | None:
        return FakeSubmitConnection(self, node) if self.submitting else None

    async def any_node(self) -> int:
        return 1

    async def connection(self, node: int) -> FakeConnection:
        return self._connection

    async def refresh_metadata(self, topics: Any = None, **kwargs: Any) -> ClusterMetadata:
        self.refreshes += 1
        self.metadata.update(snapshot(partitions=self._partitions), monotonic_ms())
        return self.metadata.snapshot


@pytest.fixture(autouse=True, params=["tasks", "submit"])
def dispatch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeClient, "submitting", request.param == "submit")


UNBOUNDED: dict[str, Any] = {
    "acks": 1,
    "enable_idempotence": False,
    "max_in_flight_requests_per_connection": 1_000_000,
}
"""librdkafka's defaults: no limit on requests in flight (with :func:`config`)."""


def config(**settings: Any) -> ProducerConfig:
    base: dict[str, Any] = {
        "bootstrap_servers": "fake:1",
        "retry_backoff_ms": 1,
        "retry_backoff_max_ms": 2,
        "linger_ms": 0,
    }
    base.update(settings)
    return ProducerConfig.from_user(**base)


async def run_sender(
    client: FakeClient,
    cfg: ProducerConfig,
    body: Callable[[RecordAccumulator], Awaitable[None]],
    clock: Callable[[], float] = monotonic_ms,
    accumulator_clock: Callable[[], float] | None = None,
) -> Sender:
    return await run_with_sender(
        client, cfg, lambda acc, sender: body(acc), clock, accumulator_clock
    )


async def run_with_sender(
    client: FakeClient,
    cfg: ProducerConfig,
    body: Callable[[RecordAccumulator, Sender], Awaitable[None]],
    clock: Callable[[], float] = monotonic_ms,
    accumulator_clock: Callable[[], float] | None = None,
) -> Sender:
    """:func:`run_sender` for a body that also pokes at the sender."""
    accumulator = RecordAccumulator(
        batch_size=cfg.batch_size,
        linger_ms=cfg.linger_ms,
        delivery_timeout_ms=cfg.delivery_timeout_ms,
        clock=accumulator_clock or clock,
    )
    sender = Sender(client, accumulator, cfg, rng=random.Random(0), clock=clock)  # type: ignore[arg-type]
    accumulator.wakeup = sender.wakeup
    async with anyio.create_task_group() as tg:
        client.task_group = tg
        tg.start_soon(sender.run)
        with anyio.fail_after(10):
            await body(accumulator, sender)
        sender.stop()
    return sender


def batch_header(request: ProduceRequest, partition: int = 0) -> Any:
    for topic in request.topic_data:
        for p in topic.partition_data:
            if p.index == partition:
                assert p.records is not None
                return RecordBatch.from_buffer(bytes(p.records)).header
    raise AssertionError(f"no batch for partition {partition}")


def answer(
    *partitions: PartitionProduceResponse, endpoints: list[NodeEndpoint] | None = None
) -> ProduceResponse:
    return ProduceResponse(
        responses=[TopicProduceResponse(TOPIC, list(partitions))], node_endpoints=endpoints or []
    )


async def flushed(acc: RecordAccumulator) -> None:
    """Flush the accumulator: every batch sent and answered."""
    for result in acc.begin_flush():
        await result.wait_async()
    acc.end_flush()


async def wait_all(futures: list[RecordFuture]) -> list[Any]:
    results: list[Any] = []
    for future in futures:
        try:
            results.append(await future)
        except Exception as exc:
            results.append(exc)
    return results


@pytest.mark.anyio
async def test_not_leader_with_leader_hint_retries_on_the_new_leader() -> None:
    """KIP-951: the response names the new leader; the retry goes there, same sequence."""
    calls = 0

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return answer(
                PartitionProduceResponse(0, 6, -1, current_leader=LeaderIdAndEpoch(2, 7)),
                endpoints=[NodeEndpoint(2, "h2", 2)],
            )
        return answer(PartitionProduceResponse(0, 0, 41))

    client = FakeClient(handler)

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, b"a"), acc.append(TOPIC, 0, 6, None, b"b")]
        metadata = await wait_all(futures)
        assert [(m.partition, m.offset, m.timestamp) for m in metadata] == [(0, 41, 5), (0, 42, 6)]

    sender = await run_sender(client, config(), body)
    assert [node for node, _ in client.requests] == [1, 2]
    first, second = (batch_header(r) for _, r in client.requests)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (1001, 0, 0)
    assert second == first
    assert client.metadata.snapshot.leader_for(TOPIC, 0) == 2
    assert client.refreshes == 0  # the hint spared a metadata request
    assert sender.metrics.retries == 1 and sender.metrics.records_sent == 2


@pytest.mark.anyio
async def test_non_retriable_error_fails_the_records_with_its_class() -> None:
    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        return answer(PartitionProduceResponse(0, InvalidRecordError.code, error_message="bad"))

    async def body(acc: RecordAccumulator) -> None:
        [error] = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        assert isinstance(error, InvalidRecordError)
        assert str(error).endswith("(t-0: bad)")

    sender = await run_sender(FakeClient(handler), config(), body)
    assert sender.metrics.errors == 1 and sender.metrics.retries == 0


@pytest.mark.anyio
async def test_retries_give_up_after_the_retries_setting() -> None:
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 7))))

    async def body(acc: RecordAccumulator) -> None:
        [error] = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        assert isinstance(error, RequestTimedOutError)

    await run_sender(client, config(retries=2, enable_idempotence=False), body)
    assert len(client.requests) == 3


@pytest.mark.anyio
async def test_delivery_timeout_ends_retries_with_a_timeout_naming_the_last_error() -> None:
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 7))))
    cfg = config(
        request_timeout_ms=10, delivery_timeout_ms=300, retry_backoff_ms=5, retry_backoff_max_ms=5
    )

    async def body(acc: RecordAccumulator) -> None:
        [error] = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        assert isinstance(error, KafkaTimeoutError)
        assert "delivery.timeout.ms=300" in str(error) and "REQUEST_TIMED_OUT" in str(error)

    await run_sender(client, cfg, body)
    # Retried (a loaded machine may take most of the 300 ms for the first answer), and no
    # more often than the 5 ms backoff allows.
    assert 2 <= len(client.requests) <= 300 // 5 + 1


async def _const(response: ProduceResponse) -> ProduceResponse:
    return response


@pytest.mark.anyio
async def test_duplicate_sequence_counts_as_success() -> None:
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 46, 9))))

    async def body(acc: RecordAccumulator) -> None:
        [md] = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        assert md.offset == 9

    await run_sender(client, config(), body)


@pytest.mark.parametrize(("init_version", "expected_pid"), [(4, 1001), (2, 1002)])
@pytest.mark.anyio
async def test_out_of_order_sequence_fails_the_batch_and_bumps_the_epoch(
    init_version: int, expected_pid: int
) -> None:
    """KIP-360 brokers bump the epoch of the same producer id; older ones give a new id."""
    broker = FakeBroker()
    calls = 0

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        nonlocal calls
        calls += 1
        if calls == 2:  # the broker lost track of us for this one
            return answer(PartitionProduceResponse(0, OutOfOrderSequenceNumberError.code))
        data = request.topic_data[0].partition_data[0].records
        assert data is not None
        return answer(broker.append(0, bytes(data)))

    client = FakeClient(handler, init_version=init_version)

    async def body(acc: RecordAccumulator) -> None:
        first = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        second = await wait_all([acc.append(TOPIC, 0, 5, None, b"b")])
        third = await wait_all([acc.append(TOPIC, 0, 5, None, b"c")])
        assert first[0].offset == 0
        assert isinstance(second[0], OutOfOrderSequenceNumberError)
        assert third[0].offset == 1

    await run_sender(client, config(), body)
    headers = [batch_header(r) for _, r in client.requests]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (1001, 0, 0),
        (1001, 0, 1),
        (expected_pid, 1 if init_version >= 3 else 0, 0),
    ]
    bump = client.init_requests[1][1]
    if init_version >= 3:
        assert (bump.producer_id, bump.producer_epoch) == (1001, 0)
    else:
        assert (bump.producer_id, bump.producer_epoch) == (-1, -1)
    assert broker.log[0] == [b"a", b"c"]


@pytest.mark.anyio
async def test_unknown_producer_id_bumps_the_epoch_and_retries() -> None:
    broker = FakeBroker()
    calls = 0

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return answer(PartitionProduceResponse(0, 59))
        data = request.topic_data[0].partition_data[0].records
        assert data is not None
        return answer(broker.append(0, bytes(data)))

    client = FakeClient(handler)

    async def body(acc: RecordAccumulator) -> None:
        [md] = await wait_all([acc.append(TOPIC, 0, 5, None, b"a")])
        assert md.offset == 0

    await run_sender(client, config(), body)
    headers = [batch_header(r) for _, r in client.requests]
    assert [(h.producer_epoch, h.base_sequence) for h in headers] == [(0, 0), (1, 0)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["ok", "ok", "ok", "refuse", "lose", "drop"]), min_size=30, max_size=30
    ),
    st.integers(1, 3),
)
def test_faults_never_duplicate_reorder_or_lose_records(faults: list[str], partitions: int) -> None:
    """Refused requests, connections lost before and after the append: once each, in order."""
    broker = FakeBroker()
    plan = iter(faults)

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        fault = next(plan, "ok")
        if fault == "lose":
            raise KafkaConnectionError("lost before the broker saw it")
        replies = []
        for p in request.topic_data[0].partition_data:
            assert p.records is not None
            if fault == "refuse":
                replies.append(PartitionProduceResponse(p.index, 6))  # NOT_LEADER_OR_FOLLOWER
            else:
                replies.append(broker.append(p.index, bytes(p.records)))
        await anyio.sleep(0)
        if fault == "drop":
            raise KafkaConnectionError("lost after the append")
        return answer(*replies)

    client = FakeClient(handler, partitions=partitions)
    sent: dict[int, list[bytes]] = {}

    async def body(acc: RecordAccumulator) -> None:
        futures = []
        for i in range(300):
            partition = i % partitions
            value = b"%d" % i
            sent.setdefault(partition, []).append(value)
            futures.append((partition, value, acc.append(TOPIC, partition, i, None, value)))
            if i % 37 == 0:
                await anyio.sleep(0)
        for partition, value, future in futures:
            md = await future
            assert broker.log[partition][md.offset] == value

    anyio.run(run_sender, client, config(batch_size=200), body)
    assert broker.log == sent


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["ok", "ok", "refuse", "lose"]), min_size=30, max_size=30))
def test_without_idempotence_one_in_flight_keeps_order(faults: list[str]) -> None:
    """max.in.flight.requests.per.connection=1: retries cannot overtake (no duplicates
    either, as long as no response is lost after an append)."""
    broker = FakeBroker()
    plan = iter(faults)

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        fault = next(plan, "ok")
        if fault == "lose":
            raise KafkaConnectionError("lost before the broker saw it")
        [p] = request.topic_data[0].partition_data
        assert p.records is not None
        assert batch_header(request).producer_id == -1
        if fault == "refuse":
            return answer(PartitionProduceResponse(p.index, 6))
        await anyio.sleep(0)
        return answer(broker.append(p.index, bytes(p.records)))

    client = FakeClient(handler)
    values = [b"%d" % i for i in range(200)]

    async def body(acc: RecordAccumulator) -> None:
        futures = []
        for i, value in enumerate(values):
            futures.append(acc.append(TOPIC, 0, i, None, value))
            if i % 29 == 0:
                await anyio.sleep(0)
        assert [(await f).offset for f in futures] == list(range(200))

    cfg = config(
        batch_size=150, enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=1
    )
    anyio.run(run_sender, client, cfg, body)
    assert broker.log == {0: values}


@pytest.mark.anyio
async def test_a_failed_batch_does_not_block_the_batches_behind_it() -> None:
    """The first batch is rejected for good; the pipelined second one, out of sequence
    for the broker now, goes through after an epoch bump."""
    broker = FakeBroker()
    calls = 0

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return answer(PartitionProduceResponse(0, InvalidRecordError.code))
        data = request.topic_data[0].partition_data[0].records
        assert data is not None
        await anyio.sleep(0)
        return answer(broker.append(0, bytes(data)))

    client = FakeClient(handler)

    async def body(acc: RecordAccumulator) -> None:
        first = acc.append(TOPIC, 0, 5, None, b"a" * 100)
        second = acc.append(TOPIC, 0, 5, None, b"b" * 100)  # a batch of its own
        results = await wait_all([first, second])
        assert isinstance(results[0], InvalidRecordError)
        assert results[1].offset == 0

    await run_sender(client, config(batch_size=100), body)
    headers = [batch_header(r) for _, r in client.requests]
    assert [(h.producer_epoch, h.base_sequence) for h in headers][:2] == [(0, 0), (0, 1)]
    assert (headers[-1].producer_epoch, headers[-1].base_sequence) == (1, 0)
    assert broker.log[0] == [b"b" * 100]


@pytest.mark.anyio
async def test_requests_drained_in_one_turn_are_written_together() -> None:
    """Three full batches of one partition wait: three pipelined requests, one write."""
    broker = FakeBroker()

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        data = request.topic_data[0].partition_data[0].records
        assert data is not None
        return answer(broker.append(0, bytes(data)))

    client = FakeClient(handler)

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, bytes([i]) * 100) for i in range(3)]
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == [0, 1, 2]

    await run_sender(client, config(batch_size=100), body)
    assert broker.log[0] == [bytes([i]) * 100 for i in range(3)]
    assert [batch_header(r).base_sequence for _, r in client.requests] == [0, 1, 2]
    if FakeClient.submitting:
        assert client.writes == [[0, 1, 2]]


@pytest.mark.anyio
async def test_abort_fails_the_batches_of_requests_in_flight() -> None:
    """The broker never answers; abort fails the records sent and those still queued."""
    sent = anyio.Event()

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        sent.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    client = FakeClient(handler)
    accumulator = RecordAccumulator(batch_size=100, linger_ms=0)
    sender = Sender(client, accumulator, config(batch_size=100), rng=random.Random(0))  # type: ignore[arg-type]
    accumulator.wakeup = sender.wakeup
    error = KafkaConnectionError("aborted by the test")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            client.task_group = tg
            tg.start_soon(sender.run)
            in_flight = accumulator.append(TOPIC, 0, 5, None, b"a" * 100)
            await sent.wait()
            queued = accumulator.append(TOPIC, 0, 5, None, b"b" * 100)
            sender.abort(error)
            await sender.finished.wait()
            tg.cancel_scope.cancel()
    assert in_flight.exception(0) is error
    assert queued.exception(0) is error
    assert accumulator.incomplete == 0
    assert len(client.requests) == 1


class HeldAnswers:
    """A submit connection whose answers the test releases, all in one step."""

    can_submit = True
    behind = False

    def __init__(self, client: FakeClient, broker: FakeBroker) -> None:
        self.client = client
        self.broker = broker
        self.held: list[tuple[ProduceRequest, Callable[[Any, Any], object]]] = []

    def start_pump(self, task_group: anyio.abc.TaskGroup) -> None:
        pass  # the test releases the answers

    def throttle_delay_ms(self) -> float:
        return 0.0  # (never throttled)

    def cork(self) -> None:
        self.client.corked = []

    def uncork(self) -> None:
        assert self.client.corked is not None
        self.client.writes.append(self.client.corked)
        self.client.corked = None

    def submit(self, request: ProduceRequest, on_response: Callable[[Any, Any], object]) -> None:
        assert self.client.corked is not None
        self.client.corked.append(len(self.client.requests))
        self.client.record(1, request)
        self.held.append((request, on_response))

    def release(self) -> None:
        held, self.held = self.held, []
        for request, on_response in held:
            data = request.topic_data[0].partition_data[0].records
            assert data is not None
            on_response(answer(self.broker.append(0, bytes(data))), None)


def held_answers() -> tuple[FakeBroker, FakeClient, HeldAnswers]:
    """A broker, and a client whose produce requests it answers when the test releases
    them (:class:`HeldAnswers`)."""
    broker = FakeBroker()

    async def unused(node: int, request: ProduceRequest) -> ProduceResponse:
        raise AssertionError("answered by HeldAnswers")

    client = FakeClient(unused)
    connection = HeldAnswers(client, broker)
    client.open_connection = lambda node: connection  # type: ignore[method-assign]
    return broker, client, connection


@pytest.mark.anyio
async def test_the_places_freed_by_responses_read_together_go_out_in_one_write() -> None:
    broker, client, connection = held_answers()

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, bytes([i]) * 100) for i in range(4)]
        while len(connection.held) < 2:
            await anyio.sleep(0)
        connection.release()  # two responses in one step
        while len(connection.held) < 2:
            await anyio.sleep(0)
        connection.release()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == [0, 1, 2, 3]

    await run_sender(client, config(batch_size=100, max_in_flight_requests_per_connection=2), body)
    assert client.writes == [[0, 1], [2, 3]]
    assert broker.log[0] == [bytes([i]) * 100 for i in range(4)]


def test_a_pass_after_responses_starts_workers_when_the_socket_falls_behind() -> None:
    """The pass run from the event loop's callback after responses (no task of its own)
    finds the connection no longer keeping up, and stale metadata: the worker and the
    refresh it needs start in the sender's task, and every record is delivered in order.

    Under ``asyncio.run`` (an application's loop, the sync producer's thread), not
    ``anyio.run``: anyio finds no event loop in a plain callback there, and the sender
    failed with its NoEventLoopError before."""
    asyncio.run(_pass_after_responses_needs_a_worker())


async def _pass_after_responses_needs_a_worker() -> None:
    broker = FakeBroker()

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        data = request.topic_data[0].partition_data[0].records
        assert data is not None
        return answer(broker.append(0, bytes(data)))

    client = FakeClient(handler)
    connection = HeldAnswers(client, broker)
    client.open_connection = lambda node: connection  # type: ignore[method-assign]
    refreshes = client.refreshes

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, bytes([i]) * 100) for i in range(4)]
        while len(connection.held) < 2:  # the other two wait for a place in flight
            await anyio.sleep(0)
        connection.can_submit = False  # the socket's buffer is past its high-water mark
        client.submitting = False  # so the rest goes through workers (client.send)
        client.metadata.request_update()
        connection.release()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == [0, 1, 2, 3]

    sender = await run_sender(
        client, config(batch_size=100, max_in_flight_requests_per_connection=2), body
    )
    assert sender.fatal_error is None
    assert broker.log[0] == [bytes([i]) * 100 for i in range(4)]
    assert client.writes == [[0, 1]]  # the other two: one request per worker
    assert len(client.requests) == 4
    assert client.refreshes > refreshes


class FallingBehind(HeldAnswers):
    """A submit connection whose socket the test makes fall behind and drain."""

    def __init__(self, client: FakeClient, broker: FakeBroker) -> None:
        super().__init__(client, broker)
        self.behind = False
        self.on_drained: list[Callable[[], object]] = []

    @property  # type: ignore[override]
    def can_submit(self) -> bool:
        return not self.behind

    def when_drained(self, callback: Callable[[], object]) -> None:
        self.on_drained.append(callback)

    def drain(self) -> None:
        self.behind = False
        waiting, self.on_drained = self.on_drained, []
        for callback in waiting:
            callback()


@pytest.mark.anyio
async def test_batches_wait_for_a_connection_that_fell_behind_then_go_out_in_one_write() -> None:
    """With max.in.flight unbounded, a connection whose socket is not keeping up gets no
    request handed to a worker (each would wait for its answer: 16 in flight at most);
    the batches stay queued until it drains, then one pass writes them together."""
    broker = FakeBroker()

    async def unused(node: int, request: ProduceRequest) -> ProduceResponse:
        raise AssertionError("answered by FallingBehind")

    client = FakeClient(unused)
    client.submitting = True  # a worker's client.send fails the test
    connection = FallingBehind(client, broker)
    client.open_connection = lambda node: connection  # type: ignore[method-assign]

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, bytes([i]) * 100) for i in range(2)]
        while len(connection.held) < 2:
            await anyio.sleep(0)
        connection.behind = True
        futures += [acc.append(TOPIC, 0, 5, None, bytes([i]) * 100) for i in range(2, 4)]
        while not connection.on_drained:
            await anyio.sleep(0)
        assert len(client.requests) == 2 and acc.queued() == 2
        connection.drain()
        while len(connection.held) < 4:
            await anyio.sleep(0)
        connection.release()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == [0, 1, 2, 3]

    cfg = config(
        batch_size=100,
        acks=1,
        enable_idempotence=False,
        max_in_flight_requests_per_connection=1_000_000,
    )
    sender = await run_sender(client, cfg, body)
    assert sender.fatal_error is None
    assert client.writes == [[0, 1], [2, 3]]
    assert broker.log[0] == [bytes([i]) * 100 for i in range(4)]


@pytest.mark.anyio
async def test_queue_time_is_creation_to_drain_and_throttle_time_is_the_answers() -> None:
    """Java's ``record-queue-time`` and ``produce-throttle-time`` (KIP-714's
    ``producer.record.queue.time`` and ``producer.produce.throttle.time``), exact with a
    test clock: batches drained 30 and 10 ms after their creation, answers throttled 7 and
    3 ms."""
    now = [1_000.0]
    throttles = iter([7, 3])

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        response = answer(PartitionProduceResponse(0, 0, 0))
        response.throttle_time_ms = next(throttles)
        return response

    client = FakeClient(handler)

    async def body(acc: RecordAccumulator) -> None:
        first = acc.append(TOPIC, 0, 5, None, b"a")
        now[0] += 30  # the sender drains it at its next pass, at this time
        await wait_all([first])
        second = acc.append(TOPIC, 0, 5, None, b"b")
        now[0] += 10
        await wait_all([second])

    sender = await run_sender(client, config(), body, clock=lambda: now[0])
    m = sender.metrics
    assert (m.batches_drained, m.queue_time_total_ms, m.queue_time_max_ms) == (2, 40.0, 30.0)
    assert (m.throttle_answers, m.throttle_time_total_ms, m.throttle_time_max_ms) == (2, 10, 7)


@pytest.mark.anyio
async def test_a_batch_opened_after_the_pass_started_waited_no_time() -> None:
    """A sync producer's thread may open a batch after the sender's pass read the time:
    its queue time is 0, not negative (here the accumulator's clock is 5 ms ahead and a
    flush sends the batch at once)."""
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 0, 0))))

    async def body(acc: RecordAccumulator) -> None:
        future = acc.append(TOPIC, 0, 5, None, b"a")
        acc.begin_flush()  # sent at once, as a flush does, though not lingered yet
        try:
            await wait_all([future])
        finally:
            acc.end_flush()

    sender = await run_sender(
        client, config(), body, clock=lambda: 1_000.0, accumulator_clock=lambda: 1_005.0
    )
    m = sender.metrics
    assert (m.batches_drained, m.queue_time_total_ms, m.queue_time_max_ms) == (1, 0.0, 0.0)


@pytest.mark.anyio
async def test_a_batch_whose_linger_ends_within_the_timer_slack_is_sent_now() -> None:
    """asyncio's timers fire on whole milliseconds: a batch 0.4 ms short of its linger is
    sent at this pass (it used to wait for a timer that could only fire up to 1 ms late),
    one 0.6 ms short is not. Under trio the sender sleeps to the deadline itself (exact in
    virtual time): no slack. The test clock stands still unless the test moves it."""
    now = [1_000.0]
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 0, 7))))
    passes = [0]

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        real_pass = sender._pass

        def counted(tg: anyio.abc.TaskGroup) -> float:
            passes[0] += 1
            return real_pass(tg)

        sender._pass = counted  # type: ignore[method-assign]
        future = acc.append(TOPIC, 0, 5, None, b"a")  # created at 1000, linger 5
        now[0] = 1_004.4
        seen = passes[0]
        while passes[0] < seen + 3:  # three passes at 1004.4, each finding 0.6 ms to go
            await anyio.sleep(0.001)
        assert client.requests == [] and not future.done()
        now[0] = 1_004.6
        if sniffio.current_async_library() == "trio":  # no slack: 0.4 ms to go still waits
            seen = passes[0]
            while passes[0] < seen + 3:
                await anyio.sleep(0.001)
            assert client.requests == [] and not future.done()
            now[0] = 1_005.0
        metadata = await future
        assert (metadata.offset, metadata.timestamp) == (7, 5)

    await run_with_sender(client, config(linger_ms=5), body, clock=lambda: now[0])
    assert len(client.requests) == 1


@pytest.mark.anyio
async def test_nudge_sends_what_is_ready_from_the_callback_itself() -> None:
    """A sync producer's thread wakes the sender with ``nudge`` in a loop callback: what is
    ready goes out there and then (written at once with ``submit``, else handed to a
    worker), while the sender's task sleeps on."""
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 0, 3))))

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        await acc.append(TOPIC, 0, 5, None, b"first")  # the producer id, first
        while sender._asleep_until is None or sender._wake.is_set():  # asleep, not woken
            await anyio.sleep(0)
        asleep_until = sender._asleep_until
        acc.wakeup = None  # as an append in another thread: the sender hears nothing ...
        future = acc.append(TOPIC, 0, 6, None, b"a")
        sender.nudge()  # ... until the loop runs this
        if client.submitting:
            assert len(client.requests) == 2
        assert sender._asleep_until == asleep_until  # the task slept through it
        assert (await future).offset == 3

    await run_with_sender(client, config(linger_ms=0), body)
    assert [batch_header(r).base_sequence for _, r in client.requests] == [0, 1]


@pytest.mark.anyio
async def test_news_of_enough_batches_runs_the_pass_inside_the_append(anyio_backend: str) -> None:
    """The async producer's wake-up (``news``): under asyncio, once the records appended
    since the last pass make NEWS_WRITE bytes, the append that tells it drains the full
    batches there and then, in one pass and one write, without a loop turn; before that it
    only wakes the task. Under trio (no such callbacks) it only wakes."""
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 0, 0))))
    per_pass = -(-NEWS_WRITE // (RECORD_OVERHEAD + 1_000))  # the bytes each record takes

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        acc.wakeup = sender.news
        acc.append(TOPIC, 0, 5, None, b"first")
        await flushed(acc)
        drained = sender.metrics.batches_drained
        for _ in range(per_pass - 1):
            acc.append(TOPIC, 0, 6, None, b"v" * 1_000)  # a batch each, full at once
        assert sender.metrics.batches_drained == drained  # told, and waiting for more
        assert sender._wake.is_set()
        acc.append(TOPIC, 0, 6, None, b"v" * 1_000)
        if sniffio.current_async_library() == "trio":
            assert sender.metrics.batches_drained == drained
            return
        assert sender.metrics.batches_drained == drained + per_pass
        if client.submitting:
            assert client.writes[-1] == list(range(1, 1 + per_pass))  # a request each

    cfg = config(
        acks=1,
        enable_idempotence=False,
        max_in_flight_requests_per_connection=1_000,
        linger_ms=60_000,
        batch_size=1_024,
    )
    await run_with_sender(client, cfg, body)
    assert len(client.requests) == 1 + per_pass


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_news_counts_bytes_not_batches_opened(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyed records spread over many partitions open a batch nearly each: ``news`` is told
    of every one, but runs a pass (which looks at every partition) only once the records
    appended since the last make NEWS_WRITE bytes, not at every batch opened (with
    ``batch.size`` 1 MiB it used to run one per batch)."""
    size = RECORD_OVERHEAD + 100  # the bytes each record below takes
    per_pass = -(-NEWS_WRITE // size)
    records = 2 * per_pass + per_pass // 2

    def each_partition(node: int, request: ProduceRequest) -> Awaitable[ProduceResponse]:
        parts = request.topic_data[0].partition_data
        return _const(answer(*(PartitionProduceResponse(p.index, 0, 0) for p in parts)))

    client = FakeClient(each_partition, partitions=records)
    passes: list[int] = []
    real_pass = Sender._pass

    def counted(self: Sender, tg: anyio.abc.TaskGroup) -> float:
        passes.append(self.accumulator.buffer_used)
        return real_pass(self, tg)

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        acc.wakeup = sender.news
        acc.append(TOPIC, 0, 5, None, b"first")
        await flushed(acc)
        monkeypatch.setattr(Sender, "_pass", counted)
        for i in range(records):  # a new batch each
            acc.append(TOPIC, i, 6, None, b"v" * 100)
        # a pass each time another NEWS_WRITE bytes had been appended, none between
        assert len(passes) == 2
        assert NEWS_WRITE <= passes[0] < NEWS_WRITE + 2 * size
        assert passes[1] - passes[0] == per_pass * size
        assert sender.metrics.batches_drained == 1  # lingering: nothing was ready
        await flushed(acc)
        assert sender.metrics.batches_drained == 1 + records

    cfg = config(
        acks=1,
        enable_idempotence=False,
        max_in_flight_requests_per_connection=1_000,
        linger_ms=60_000,
        batch_size=1 << 20,
    )
    await run_with_sender(client, cfg, body)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_a_linger_deadline_runs_its_pass_in_a_timer_callback(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under asyncio a sleeping sender's deadline runs its pass in a plain timer callback,
    not in the sender's task once a cancelled wait has woken it: each of three lingering
    batches is drained from that callback. (Trio has no such callbacks: there the task
    sleeps with a deadline.)"""
    client = FakeClient(lambda node, r: _const(answer(PartitionProduceResponse(0, 0, 0))))
    drained_outside: list[bool] = []
    real_drain = RecordAccumulator.drain

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        def drain(self: RecordAccumulator, *args: Any, **kwargs: Any) -> Any:
            batches = real_drain(self, *args, **kwargs)
            drained_outside.extend(sender._outside_task for _ in batches)
            return batches

        monkeypatch.setattr(RecordAccumulator, "drain", drain)
        for value in (b"a", b"b", b"c"):
            await acc.append(TOPIC, 0, 5, None, value)

    await run_with_sender(client, config(linger_ms=50), body)
    assert drained_outside == [True, True, True]
    assert len(client.requests) == 3


@pytest.mark.anyio
async def test_a_stored_answer_settles_offsets_metrics_and_places_in_flight() -> None:
    """The common answer (one batch, stored): each record's offset, the request's latency
    on the test clock, the counters, and no place left taken in flight."""
    now = [1_000.0]

    async def handler(node: int, request: ProduceRequest) -> ProduceResponse:
        now[0] += 4
        return answer(PartitionProduceResponse(0, 0, 10, 77))

    client = FakeClient(handler)
    results: list[Any] = []

    async def body(acc: RecordAccumulator) -> None:
        futures = [acc.append(TOPIC, 0, 5, None, b"a"), acc.append(TOPIC, 0, 6, None, b"bc")]
        results.extend(await wait_all(futures))

    sender = await run_sender(client, config(), body, clock=lambda: now[0])
    assert [(m.partition, m.offset, m.timestamp) for m in results] == [(0, 10, 77), (0, 11, 77)]
    m = sender.metrics
    assert (m.requests_sent, m.batches_sent, m.records_sent, m.errors) == (1, 1, 2, 0)
    assert (m.latency_total_ms, m.latency_max_ms, m.throttle_answers) == (4.0, 4.0, 1)
    assert m.bytes_sent == len(client.requests[0][1].topic_data[0].partition_data[0].records)
    assert sender.in_flight == 0
    assert sender._tp_in_flight == {(TOPIC, 0): 0}


@pytest.mark.anyio
async def test_an_answer_for_another_partition_retries_the_batch() -> None:
    """An answer that does not name the batch's partition leaves the batch unanswered: it
    is retried (a connection error), then stored at the second answer's offset."""
    answers = iter(
        [answer(PartitionProduceResponse(1, 0, 5)), answer(PartitionProduceResponse(0, 0, 8))]
    )
    client = FakeClient(lambda node, r: _const(next(answers)))
    results: list[Any] = []

    async def body(acc: RecordAccumulator) -> None:
        results.extend(await wait_all([acc.append(TOPIC, 0, 5, None, b"a")]))

    sender = await run_sender(client, config(), body)
    assert [(m.partition, m.offset) for m in results] == [(0, 8)]
    m = sender.metrics
    assert (m.retries, m.requests_sent, m.batches_sent, m.records_sent) == (1, 2, 1, 1)
    assert sender.in_flight == 0


@pytest.mark.anyio
async def test_a_batch_whose_linger_ended_waits_for_an_answer_while_the_broker_is_behind() -> None:
    """Once LINGER_HOLD_IN_FLIGHT requests are unanswered, a batch that is ready only
    because its linger ended waits, and the records appended meanwhile join it: the
    answer's pass sends them in one batch. A full batch still goes, and so does a
    flush's."""
    broker, client, connection = held_answers()

    def last_sent() -> list[bytes | None]:
        data = client.requests[-1][1].topic_data[0].partition_data[0].records
        assert data is not None
        return [r.value for r in RecordBatch.from_buffer(bytes(data))]

    async def sent(count: int) -> None:
        """Until ``count`` requests were sent, then a few more turns: no more follow."""
        while len(client.requests) < count:
            await anyio.sleep(0)
        for _ in range(20):
            await anyio.sleep(0)
        assert len(client.requests) == count

    async def body(acc: RecordAccumulator) -> None:
        futures = []
        for i in range(LINGER_HOLD_IN_FLIGHT):  # each alone in a request
            futures.append(acc.append(TOPIC, 0, 5, None, b"early %d" % i))
            await sent(i + 1)
        futures += [acc.append(TOPIC, 0, 5, None, b"held %d" % i) for i in range(3)]
        await sent(LINGER_HOLD_IN_FLIGHT)  # their linger (0 ms) ended, yet they wait
        connection.release()
        await sent(LINGER_HOLD_IN_FLIGHT + 1)
        assert last_sent() == [b"held 0", b"held 1", b"held 2"]  # one batch
        for i in range(LINGER_HOLD_IN_FLIGHT - 1):  # unanswered up to the hold again
            futures.append(acc.append(TOPIC, 0, 5, None, b"more %d" % i))
            await sent(LINGER_HOLD_IN_FLIGHT + 2 + i)
        futures.append(acc.append(TOPIC, 0, 5, None, b"x" * 900))
        futures.append(acc.append(TOPIC, 0, 5, None, b"y" * 900))  # the x batch is full
        await sent(2 * LINGER_HOLD_IN_FLIGHT + 1)
        assert last_sent() == [b"x" * 900]  # full: sent while the y batch waits
        flushing = acc.begin_flush()
        await sent(2 * LINGER_HOLD_IN_FLIGHT + 2)
        assert last_sent() == [b"y" * 900]  # a flush sends it at once
        connection.release()
        for result in flushing:
            await result.wait_async()
        acc.end_flush()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == list(range(len(futures)))

    cfg = config(batch_size=1000, **UNBOUNDED)
    sender = await run_sender(client, cfg, body)
    assert sender.fatal_error is None
    assert broker.log[0] == [
        *(b"early %d" % i for i in range(LINGER_HOLD_IN_FLIGHT)),
        *(b"held %d" % i for i in range(3)),
        *(b"more %d" % i for i in range(LINGER_HOLD_IN_FLIGHT - 1)),
        b"x" * 900,
        b"y" * 900,
    ]


@pytest.mark.anyio
async def test_no_batch_is_held_for_an_answer_while_sends_wait_for_room() -> None:
    """While a send waits for room in ``buffer.memory``, nothing more joins the batches:
    a batch whose linger ended goes at once, however many requests are unanswered."""
    broker, client, connection = held_answers()

    async def sent(count: int) -> None:
        while len(client.requests) < count:
            await anyio.sleep(0)

    async def body(acc: RecordAccumulator) -> None:
        futures = []
        for i in range(LINGER_HOLD_IN_FLIGHT):
            futures.append(acc.append(TOPIC, 0, 5, None, b"early %d" % i))
            await sent(i + 1)
        acc.on_space = lambda: None  # as the async producer's queue of waiting sends sets it
        assert acc.exhausted
        futures.append(acc.append(TOPIC, 0, 5, None, b"while waiting"))
        await sent(LINGER_HOLD_IN_FLIGHT + 1)
        acc.on_space = None
        connection.release()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == list(range(LINGER_HOLD_IN_FLIGHT + 1))

    cfg = config(batch_size=1000, **UNBOUNDED)
    sender = await run_sender(client, cfg, body)
    assert sender.fatal_error is None
    early = [b"early %d" % i for i in range(LINGER_HOLD_IN_FLIGHT)]
    assert broker.log[0] == [*early, b"while waiting"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_news_runs_no_pass_while_the_last_held_batches_for_an_answer(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a pass held batches for an answer, appending runs no pass (NEWS_WRITE bytes
    and more): it could send nothing but filled batches to a broker that is behind, at
    the cost of a look at every partition. The answer's pass sends what was appended, in
    one batch."""
    broker, client, connection = held_answers()
    passes: list[int] = []
    real_pass = Sender._pass

    def counted(self: Sender, tg: anyio.abc.TaskGroup) -> float:
        passes.append(len(client.requests))
        return real_pass(self, tg)

    count = -(-NEWS_WRITE // (RECORD_OVERHEAD + 1_000)) + 1  # NEWS_WRITE bytes and more

    async def body(acc: RecordAccumulator, sender: Sender) -> None:
        acc.wakeup = sender.news
        futures = []
        for i in range(LINGER_HOLD_IN_FLIGHT):
            futures.append(acc.append(TOPIC, 0, 5, None, b"early %d" % i))
            while len(client.requests) <= i:
                await anyio.sleep(0)
        futures.append(acc.append(TOPIC, 0, 5, None, b"held"))
        while not sender._held_for_answer:
            await anyio.sleep(0)
        monkeypatch.setattr(Sender, "_pass", counted)
        futures += [acc.append(TOPIC, 0, 5, None, b"v" * 1_000) for _ in range(count)]
        for _ in range(20):
            await anyio.sleep(0)
        assert passes == []
        assert len(client.requests) == LINGER_HOLD_IN_FLIGHT
        connection.release()
        while len(client.requests) == LINGER_HOLD_IN_FLIGHT:
            await anyio.sleep(0)
        assert passes == [LINGER_HOLD_IN_FLIGHT]
        data = client.requests[-1][1].topic_data[0].partition_data[0].records
        assert data is not None
        assert [r.value for r in RecordBatch.from_buffer(bytes(data))] == [
            b"held",
            *[b"v" * 1_000] * count,
        ]
        connection.release()
        metadata = await wait_all(futures)
        assert [m.offset for m in metadata] == list(range(len(futures)))

    cfg = config(batch_size=1 << 20, **UNBOUNDED)
    await run_with_sender(client, cfg, body)
    early = [b"early %d" % i for i in range(LINGER_HOLD_IN_FLIGHT)]
    assert broker.log[0] == [*early, b"held", *[b"v" * 1_000] * count]
