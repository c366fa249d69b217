"""The transactional producer's coordinator requests against a scripted coordinator:
retries and re-lookups, a commit whose caller timed out (the retry waits for the same
EndTxn), an EndTxn whose answer was lost (sent again, same epoch), and init_transactions
after a commit of unknown outcome (the epoch is bumped, so the old EndTxn cannot apply
to a later transaction)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette import AsyncProducer, TopicPartition
from kafkette.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
)
from kafkette.producer.transactions import ProducerTxnState
from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkette.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkette.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from kafkette.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kafkette.protocol.schema import Request
from kafkette.structs import ConsumerGroupMetadata

pytestmark = pytest.mark.anyio

NOT_COORDINATOR, CONCURRENT, FENCED = 16, 51, 90
TP = TopicPartition("in", 0)
GROUP = ConsumerGroupMetadata("g", 1, "member-1")


@attrs.define
class Hold:
    """Answer ``response`` only once ``release`` is set."""

    response: Any
    release: anyio.Event = attrs.Factory(anyio.Event)


class FakeConnection:
    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node

    def version_for(self, request: Any, maximum: int | None = None) -> int:
        highest: int = request.VALID_VERSIONS[1]
        return highest if maximum is None else min(highest, maximum)

    async def aclose(self) -> None:
        self.client.log.append(("close", self.node))

    async def request(self, request: Request, *, version: int | None = None) -> Any:
        self.client.log.append(("request", self.node, type(request).__name__))
        self.client.requests.append(request)
        answer = self.client.answers.pop(0)
        if isinstance(answer, Hold):
            await answer.release.wait()
            answer = answer.response
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeClient:
    """The coordinator side of KafkaClient, answering from a script."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.log: list[tuple[Any, ...]] = []
        self.requests: list[Request] = []

    async def coordinator(self, key: str, key_type: int = 0, **_: Any) -> int:
        self.log.append(("find", key, key_type))
        return 1

    async def coordinator_connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    def invalidate_coordinator(self, key: str, key_type: int = 0) -> None:
        self.log.append(("invalidate", key, key_type))


@pytest.fixture
async def producer() -> AsyncIterator[AsyncProducer]:
    async with AsyncProducer(
        bootstrap_servers="memory://unused-by-these-tests",
        transactional_id="tx",
        retry_backoff_ms=1,
        retry_backoff_max_ms=1,
    ) as producer:
        yield producer


def script(producer: AsyncProducer, *answers: Any) -> FakeClient:
    client = FakeClient(*answers)
    runner = producer._core.transactions  # type: ignore[union-attr]
    assert runner is not None
    runner.client = client
    return client


def init_ok(producer_id: int = 7, epoch: int = 0) -> InitProducerIdResponse:
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=epoch)


def committed() -> TxnOffsetCommitResponse:
    partition = TxnOffsetCommitResponsePartition(partition_index=0, error_code=0)
    return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic("in", [partition])])


def manager_of(producer: AsyncProducer) -> Any:
    return producer._core.transactions.manager  # type: ignore[union-attr]


async def test_init_finds_the_coordinator_again_and_retries(producer: AsyncProducer) -> None:
    """NOT_COORDINATOR: forget, find again, resend; CONCURRENT_TRANSACTIONS: resend;
    a lost connection: forget and resend; then the id and epoch."""
    client = script(
        producer,
        InitProducerIdResponse(error_code=NOT_COORDINATOR),
        InitProducerIdResponse(error_code=CONCURRENT),
        KafkaConnectionError("cut"),
        init_ok(7, 2),
    )
    await producer.init_transactions()
    assert (manager_of(producer).producer_id, manager_of(producer).epoch) == (7, 2)
    request = ("request", 1, "InitProducerIdRequest")
    assert client.log == [
        ("find", "tx", 1), request, ("invalidate", "tx", 1),
        ("find", "tx", 1), request,
        ("find", "tx", 1), request, ("invalidate", "tx", 1),
        ("find", "tx", 1), request,
    ]  # fmt: skip
    assert client.requests[0] == InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    )


async def test_offsets_go_to_the_group_coordinator(producer: AsyncProducer) -> None:
    """AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the group's
    (key type 0) with the member's metadata; EndTxn commits."""
    client = script(producer, init_ok(), AddOffsetsToTxnResponse(), committed(), EndTxnResponse())
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 42}, GROUP)
    await producer.commit_transaction()
    assert [entry for entry in client.log if entry[0] == "find"] == [
        ("find", "tx", 1), ("find", "tx", 1), ("find", "g", 0), ("find", "tx", 1),
    ]  # fmt: skip
    add, commit, end = client.requests[1:]
    assert add == AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=0, group_id="g"
    )
    assert isinstance(commit, TxnOffsetCommitRequest)
    assert (commit.generation_id, commit.member_id) == (1, "member-1")
    assert commit.topics[0].partitions[0].committed_offset == 42
    assert end == EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=0, committed=True
    )
    assert manager_of(producer).state is ProducerTxnState.READY


async def test_a_timed_out_commit_is_waited_for_again(producer: AsyncProducer) -> None:
    """The caller stops waiting, the EndTxn goes on; other calls are refused meanwhile;
    calling commit again waits for the same EndTxn (one EndTxn in all)."""
    held = Hold(EndTxnResponse())
    client = script(producer, init_ok(), AddOffsetsToTxnResponse(), committed(), held)
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 1}, GROUP)
    with pytest.raises(KafkaTimeoutError, match="call it again"):
        await producer.commit_transaction(timeout=0.05)
    with pytest.raises(IllegalStateError, match="previous commit_transaction timed out"):
        await producer.abort_transaction()
    with pytest.raises(IllegalStateError, match="previous commit_transaction timed out"):
        producer.begin_transaction()
    held.release.set()
    await producer.commit_transaction()
    assert [type(r).__name__ for r in client.requests].count("EndTxnRequest") == 1
    producer.begin_transaction()  # the commit was seen: the next transaction may start
    assert manager_of(producer).state is ProducerTxnState.IN_TRANSACTION


async def test_an_end_txn_without_answer_is_sent_again(producer: AsyncProducer) -> None:
    """A connection lost under EndTxn: the same EndTxn (same epoch) goes to the
    coordinator found again; the coordinator answers the retry as it did the first."""
    client = script(
        producer,
        init_ok(),
        AddOffsetsToTxnResponse(),
        committed(),
        KafkaConnectionError("cut after sending"),
        EndTxnResponse(),
    )
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 1}, GROUP)
    await producer.commit_transaction()
    ends = [r for r in client.requests if isinstance(r, EndTxnRequest)]
    assert ends == [EndTxnRequest(transactional_id="tx", producer_id=7, committed=True)] * 2


async def test_init_after_a_commit_of_unknown_outcome_bumps_the_epoch(
    producer: AsyncProducer,
) -> None:
    """init_transactions after a timed-out commit abandons the EndTxn, closes its
    connection and sends the InitProducerId of a new producer: the coordinator finishes
    the old transaction and bumps the epoch, so a late EndTxn of epoch 0 is fenced and
    the next transaction runs at epoch 1. (With the current id and epoch, KIP-360, the
    retry after the coordinator aborted an open transaction would be fenced.)"""
    held = Hold(EndTxnResponse())
    client = script(
        producer,
        init_ok(7, 0),
        AddOffsetsToTxnResponse(),
        committed(),
        held,
        InitProducerIdResponse(error_code=CONCURRENT),  # the coordinator completes it first
        init_ok(7, 1),
        AddOffsetsToTxnResponse(),
        committed(),
        EndTxnResponse(),
    )
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 1}, GROUP)
    with pytest.raises(KafkaTimeoutError):
        await producer.commit_transaction(timeout=0.05)
    await producer.init_transactions()
    manager = manager_of(producer)
    assert (manager.state, manager.epoch) == (ProducerTxnState.READY, 1)
    assert manager.partitions == set() and not manager.transaction_started
    end = client.log.index(("request", 1, "EndTxnRequest"))
    assert client.log[end + 1 : end + 4] == [
        ("close", 1),
        ("invalidate", "tx", 1),
        ("find", "tx", 1),
    ]
    assert client.requests[4] == InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    )
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 2}, GROUP)
    await producer.commit_transaction()
    assert client.requests[-1] == EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=1, committed=True
    )


async def test_fenced_end_txn_is_fatal(producer: AsyncProducer) -> None:
    """PRODUCER_FENCED on EndTxn: the commit raises it, and every later call too."""
    script(
        producer,
        init_ok(),
        AddOffsetsToTxnResponse(),
        committed(),
        EndTxnResponse(error_code=FENCED),
    )
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send_offsets_to_transaction({TP: 1}, GROUP)
    with pytest.raises(ProducerFencedError):
        await producer.commit_transaction()
    with pytest.raises(ProducerFencedError):
        producer.begin_transaction()
    with pytest.raises(KafkaError):
        await producer.abort_transaction()


async def test_batches_wait_until_their_partition_is_added(producer: AsyncProducer) -> None:
    """A record to a new partition: AddPartitionsToTxn first; its batch is not sent
    until the coordinator added the partition."""
    held = Hold(
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                AddPartitionsToTxnTopicResult("t", [AddPartitionsToTxnPartitionResult(0, 0)])
            ]
        )
    )
    client = script(producer, init_ok(), held, EndTxnResponse())  # EndTxn: close aborts
    await producer.init_transactions()
    producer.begin_transaction()
    future = await producer.send("t", b"v", partition=0)
    with anyio.move_on_after(0.3):
        await future
    assert not future.done()
    assert producer.metrics()["requests_sent"] == 0
    assert client.requests[1] == AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnTopic("t", [0])],
    )
    held.release.set()
    with anyio.fail_after(10):
        while producer.metrics()["requests_sent"] == 0:
            await anyio.sleep(0.01)


# ---- any sequence of transient faults


class FlakyCoordinator(FakeClient):
    """Answers every request correctly, after the transient fault the script gives it
    (a retriable code, a moved coordinator, a lost connection) or at once."""

    def __init__(self, faults: list[int | str | None]) -> None:
        super().__init__()
        self.faults = list(faults)

    async def coordinator_connection(self, node: int) -> FakeConnection:
        return FlakyConnection(self, node)


class FlakyConnection(FakeConnection):
    client: FlakyCoordinator

    async def request(self, request: Request, *, version: int | None = None) -> Any:
        client = self.client
        fault = client.faults.pop(0) if client.faults else None
        client.log.append(("request", type(request).__name__, fault))
        if fault == "cut":
            raise KafkaConnectionError("cut")
        code = fault if isinstance(fault, int) else 0
        if isinstance(request, InitProducerIdRequest):
            return InitProducerIdResponse(error_code=code, producer_id=7, producer_epoch=0)
        if isinstance(request, AddOffsetsToTxnRequest):
            return AddOffsetsToTxnResponse(error_code=code)
        if isinstance(request, TxnOffsetCommitRequest):
            partition = TxnOffsetCommitResponsePartition(partition_index=0, error_code=code)
            return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic("in", [partition])])
        assert isinstance(request, EndTxnRequest)
        if not code:
            client.requests.append(request)
        return EndTxnResponse(error_code=code)


FAULTS = st.lists(
    st.sampled_from([None, None, NOT_COORDINATOR, 15, 14, CONCURRENT, "cut"]), max_size=25
)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(faults=FAULTS)
async def test_transient_faults_delay_but_never_change_the_outcome(
    anyio_backend: str, faults: list[int | str | None]
) -> None:
    """Whatever transient faults come first, init, offsets, commit, offsets, abort all
    succeed, each EndTxn says what the caller asked, and the producer ends READY."""
    async with AsyncProducer(
        bootstrap_servers="memory://unused-by-these-tests",
        transactional_id="tx",
        retry_backoff_ms=1,
        retry_backoff_max_ms=1,
    ) as producer:
        client = FlakyCoordinator(faults)
        producer._core.transactions.client = client  # type: ignore[union-attr]
        with anyio.fail_after(10):
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send_offsets_to_transaction({TP: 1}, GROUP)
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.send_offsets_to_transaction({TP: 2}, GROUP)
            await producer.abort_transaction()
        assert manager_of(producer).state is ProducerTxnState.READY
    assert [r.committed for r in client.requests if isinstance(r, EndTxnRequest)] == [
        True,
        False,
    ]
    answered = [name for _, name, fault in client.log if fault is None]
    assert answered == [
        "InitProducerIdRequest",
        "AddOffsetsToTxnRequest",
        "TxnOffsetCommitRequest",
        "EndTxnRequest",
        "AddOffsetsToTxnRequest",
        "TxnOffsetCommitRequest",
        "EndTxnRequest",
    ]
