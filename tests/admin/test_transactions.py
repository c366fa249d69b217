"""The admin's transaction operations: on memory:// (async on asyncio and trio, and sync)
around a real transaction, and against a scripted coordinator for retries and per-item
outcomes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkette import (
    AdminClient,
    AsyncAdminClient,
    AsyncProducer,
    NewTopic,
    Producer,
    TopicPartition,
)
from kafkette.admin import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionState,
)
from kafkette.client.inprocess import close_cluster
from kafkette.client.metadata import BrokerInfo, ClusterMetadata
from kafkette.errors import (
    KafkaConnectionError,
    TransactionalIdNotFoundError,
    UnsupportedVersionError,
)
from kafkette.protocol.messages import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafkette.protocol.messages.describe_transactions_response import TopicData
from kafkette.protocol.messages.describe_transactions_response import (
    TransactionState as DescribedState,
)
from kafkette.protocol.messages.list_transactions_response import (
    TransactionState as ListedState,
)
from kafkette.protocol.schema import Request

LOADING, NOT_COORDINATOR = 14, 16
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.fixture
def cluster() -> Iterator[str]:
    url = f"memory://admin-txn-{uuid.uuid4().hex[:8]}"
    try:
        yield url
    finally:
        close_cluster(url)


@pytest.mark.anyio
async def test_async_operations_around_a_transaction(cluster: str) -> None:
    """An open transaction is listed Ongoing, described with its partitions, and its
    partitions' leader reports its first offset; once committed, it is CompleteCommit,
    with no partitions and no open offset."""
    async with (
        AsyncProducer(bootstrap_servers=cluster, transactional_id="tx-a") as producer,
        AsyncAdminClient(bootstrap_servers=cluster) as admin,
    ):
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send_and_wait("t", b"x", partition=0)
        await producer.send_and_wait("t", b"y", partition=0)
        pid = producer._core.transactions.manager.producer_id  # type: ignore[union-attr]

        listed = (await admin.list_transactions()).all()
        assert listed == (TransactionListing("tx-a", pid, TransactionState.ONGOING, 1),)
        assert (await admin.list_transactions(states=["CompleteCommit"])).all() == ()
        assert (await admin.list_transactions(producer_ids=[pid + 1])).all() == ()

        results = await admin.describe_transactions(["tx-a", "missing"])
        description = results["tx-a"].result()
        assert description.state is TransactionState.ONGOING
        assert (description.producer_id, description.producer_epoch) == (pid, 0)
        assert description.transaction_timeout_ms == 60_000
        assert description.transaction_start_time_ms is not None
        assert description.topic_partitions == frozenset({T0})
        assert isinstance(results["missing"].error, TransactionalIdNotFoundError)

        producers = (await admin.describe_producers([T0])).all()[T0]
        assert len(producers) == 1
        assert producers[0].producer_id == pid and producers[0].last_sequence == 1
        assert producers[0].current_transaction_start_offset == 0

        await producer.commit_transaction()
        listed = (await admin.list_transactions(states=[TransactionState.COMPLETE_COMMIT])).all()
        assert listed == (TransactionListing("tx-a", pid, TransactionState.COMPLETE_COMMIT, 1),)
        description = (await admin.describe_transactions(["tx-a"]))["tx-a"].result()
        assert description.state is TransactionState.COMPLETE_COMMIT
        assert description.topic_partitions == frozenset()
        producers = (await admin.describe_producers([T0])).all()[T0]
        assert producers[0].current_transaction_start_offset is None


def test_sync_operations(cluster: str) -> None:
    """The sync AdminClient, with two producers on two partitions."""
    with (
        Producer(bootstrap_servers=cluster, transactional_id="tx-1") as one,
        Producer(bootstrap_servers=cluster, transactional_id="tx-2") as two,
        AdminClient(bootstrap_servers=cluster) as admin,
    ):
        admin.create_topics([NewTopic("t", 2)]).all()
        one.init_transactions()
        two.init_transactions()
        one.begin_transaction()
        one.send("t", b"a", partition=0).result(10)
        two.begin_transaction()
        two.send("t", b"b", partition=1).result(10)
        two.send("t", b"c", partition=1).result(10)
        ids = {"tx-1": one, "tx-2": two}
        pids = {name: p._core.transactions.manager.producer_id for name, p in ids.items()}  # type: ignore[union-attr]
        listed = admin.list_transactions().all()
        assert [(t.transactional_id, t.producer_id, t.state) for t in listed] == [
            ("tx-1", pids["tx-1"], TransactionState.ONGOING),
            ("tx-2", pids["tx-2"], TransactionState.ONGOING),
        ]
        described = admin.describe_transactions(["tx-2"]).all()["tx-2"]
        assert described.topic_partitions == frozenset({T1})
        producers = admin.describe_producers([T0, T1]).all()
        assert [(s.producer_id, s.last_sequence) for s in producers[T0]] == [(pids["tx-1"], 0)]
        assert [(s.producer_id, s.last_sequence) for s in producers[T1]] == [(pids["tx-2"], 1)]
        one.abort_transaction()
        two.commit_transaction()
        states = {t.transactional_id: t.state for t in admin.list_transactions().all()}
        assert states == {
            "tx-1": TransactionState.COMPLETE_ABORT,
            "tx-2": TransactionState.COMPLETE_COMMIT,
        }


def test_states_parse_case_insensitively() -> None:
    assert TransactionState.parse("prepareCommit") is TransactionState.PREPARE_COMMIT
    assert TransactionState.parse("Whatever") is TransactionState.UNKNOWN


# ---- a scripted coordinator


class FakeConnection:
    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node

    def version_for(self, request: Any, maximum: int | None = None) -> int:
        highest: int = request.VALID_VERSIONS[1]
        return self.client.versions.get(request.API_KEY, highest)

    async def request(self, request: Request, *, version: int | None = None) -> Any:
        self.client.log.append(("request", self.node, type(request).__name__))
        self.client.requests.append(request)
        answer = self.client.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeClient:
    """The slice of KafkaClient the transaction operations use, answering from a script."""

    def __init__(self, *answers: Any, versions: dict[int, int] | None = None) -> None:
        self.answers = list(answers)
        self.versions = versions or {}
        self.log: list[tuple[Any, ...]] = []
        self.requests: list[Request] = []
        self.coordinators = [1]
        self.brokers = {1: BrokerInfo(1, "b1", 9092), 2: BrokerInfo(2, "b2", 9093)}

    async def coordinator(self, key: str, key_type: int = 0, **_: Any) -> int:
        node = self.coordinators[0] if len(self.coordinators) == 1 else self.coordinators.pop(0)
        self.log.append(("find", key, key_type, node))
        return node

    async def coordinator_connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    async def connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    def invalidate_coordinator(self, key: str, key_type: int = 0) -> None:
        self.log.append(("invalidate", key, key_type))

    async def refresh_metadata(self, topics: Any = None, **_: Any) -> ClusterMetadata:
        return ClusterMetadata(brokers=dict(self.brokers))

    async def close(self) -> None:
        pass


def admin_with(client: FakeClient) -> AsyncAdminClient:
    admin = AsyncAdminClient(
        bootstrap_servers="localhost:9092", retry_backoff_ms=1, retry_backoff_max_ms=1
    )
    admin._client = client  # type: ignore[assignment]
    return admin


def described(code: int = 0, **fields: Any) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[DescribedState(error_code=code, transactional_id="tx", **fields)]
    )


@pytest.mark.anyio
async def test_describe_retries_until_the_coordinator_answers() -> None:
    """NOT_COORDINATOR forgets the transaction coordinator (key type 1) and finds it again;
    LOAD_IN_PROGRESS retries it; a broken connection forgets it; then the answer, decoded."""
    client = FakeClient(
        described(NOT_COORDINATOR),
        described(LOADING),
        KafkaConnectionError("cut"),
        described(
            transaction_state="PrepareCommit",
            transaction_timeout_ms=30_000,
            transaction_start_time_ms=1_700_000_000_000,
            producer_id=12,
            producer_epoch=3,
            topics=[TopicData("t", [1, 0]), TopicData("u", [4])],
        ),
    )
    client.coordinators = [1, 2, 2, 2]
    async with admin_with(client) as admin:
        result = (await admin.describe_transactions(["tx"]))["tx"].result()
    assert result == TransactionDescription(
        coordinator_id=2,
        state=TransactionState.PREPARE_COMMIT,
        producer_id=12,
        producer_epoch=3,
        transaction_timeout_ms=30_000,
        transaction_start_time_ms=1_700_000_000_000,
        topic_partitions=frozenset({T0, T1, TopicPartition("u", 4)}),
    )
    assert client.log == [
        ("find", "tx", 1, 1),
        ("request", 1, "DescribeTransactionsRequest"),
        ("invalidate", "tx", 1),
        ("find", "tx", 1, 2),
        ("request", 2, "DescribeTransactionsRequest"),
        ("find", "tx", 1, 2),
        ("request", 2, "DescribeTransactionsRequest"),
        ("invalidate", "tx", 1),
        ("find", "tx", 1, 2),
        ("request", 2, "DescribeTransactionsRequest"),
    ]
    assert client.requests[0] == DescribeTransactionsRequest(transactional_ids=["tx"])


@pytest.mark.anyio
async def test_list_asks_every_broker_with_the_filters() -> None:
    """ListTransactions goes to each broker with the state, producer id and duration
    filters; a broker that keeps failing is reported in ``errors``, the others listed."""
    client = FakeClient(
        ListTransactionsResponse(
            transaction_states=[ListedState("b", 5, "Ongoing"), ListedState("a", 4, "Empty")]
        ),
        ListTransactionsResponse(error_code=31),  # CLUSTER_AUTHORIZATION_FAILED
    )
    async with admin_with(client) as admin:
        result = await admin.list_transactions(
            states=["Ongoing", TransactionState.EMPTY], producer_ids=[4, 5], duration_ms=1000
        )
    assert result.valid == (
        TransactionListing("a", 4, TransactionState.EMPTY, 1),
        TransactionListing("b", 5, TransactionState.ONGOING, 1),
    )
    assert list(result.errors) == [2]
    assert (
        client.requests
        == [
            ListTransactionsRequest(
                state_filters=["Ongoing", "Empty"], producer_id_filters=[4, 5], duration_filter=1000
            )
        ]
        * 2
    )


@pytest.mark.anyio
async def test_duration_filter_needs_list_transactions_v1() -> None:
    client = FakeClient(versions={ListTransactionsRequest.API_KEY: 0})
    client.brokers = {1: BrokerInfo(1, "b1", 9092)}
    async with admin_with(client) as admin:
        result = await admin.list_transactions(duration_ms=5)
    assert isinstance(result.errors[1], UnsupportedVersionError)
    assert client.requests == []


def test_producer_state_fields() -> None:
    """-1 (none) becomes None for the coordinator epoch and the open transaction's offset."""
    state = ProducerState(1, 0, 4, 99, None, None)
    assert state.current_transaction_start_offset is None
