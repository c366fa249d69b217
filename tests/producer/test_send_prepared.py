"""Producers with serializers or transactions take the C send too
(``routes.send_prepared``), once ``ProducerCore.prepare_record`` did their steps.

A serializer is called once per record, with the same arguments and errors as on
the general path, which takes the serialized bytes when the C send declines. A
transactional record goes to the C send only while the transaction accepts sends and
only to a partition already noted for it (``TransactionManager.noted``): the first
record to a partition in each transaction, and every record in any other state, take
the general path, which adds the partition or raises as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette import AsyncProducer, Producer
from kafkette.client.inprocess import close_cluster
from kafkette.errors import IllegalStateError, KafkaError, SerializationError
from kafkette.producer import _accumulate, accumulator, append_state
from kafkette.producer.core import ProducerCore
from kafkette.producer.futures import RecordMetadata
from kafkette.producer.transactions import ProducerTxnState, TransactionManager
from kafkette.testing import MemoryCluster
from tests.producer.test_append_state import state
from tests.producer.test_send_fast_path import refuse_the_general_path
from tests.producer.test_send_headers import c_side
from tests.producer.transactions.helpers import read_all
from tests.producer.transactions.test_memory import create

T0 = 1_700_000_000_000


class Counting:
    """A serializer that counts its calls: ``prefix + value``."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.calls: list[Any] = []

    def __call__(self, obj: Any) -> Any:
        self.calls.append(obj)
        return None if obj == "none" else self.prefix + obj.encode()


class GeneralPathCalls:
    """Counts the sends that take the general path (``ProducerCore.prepare_send``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = ProducerCore.prepare_send

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(ProducerCore, "prepare_send", counted)


# ---- serializers


def test_sync_send_with_serializers_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    values, keys = Counting(b"v:"), Counting(b"k:")
    with (
        MemoryCluster() as cluster,
        Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            value_serializer=values,
            key_serializer=keys,
            linger_ms=50,
        ) as p,
    ):
        assert p._core.routes.prepared and not p._core.routes.plain
        # the first send declines (the topic's metadata), the general path takes the
        # serialized record: the serializers ran once
        p.send("t", "first", timestamp=T0).result(10)
        p.send("t", "second", timestamp=T0).result(10)
        assert values.calls == ["first", "second"] and keys.calls == []
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [
                p.send("t", "a", key="x", timestamp=T0 + 1),
                p.send("t", "none", key="y", headers=[("h", b"1")], timestamp=T0 + 2),
                p.send("t", None, key=None, timestamp=T0 + 3),
                p.send("t", "b", on_delivery=lambda error, md: None, timestamp=T0 + 4),
            ]
        p.flush()
        assert [f.result(0) for f in futures] == [
            RecordMetadata("t", 0, offset, T0 + offset - 1) for offset in (2, 3, 4, 5)
        ]
        records = cluster.records("t")
    assert values.calls == ["first", "second", "a", "none", "b"]
    assert keys.calls == ["x", "y"]
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (None, b"v:first", []),
        (None, b"v:second", []),
        (b"k:x", b"v:a", []),
        (b"k:y", None, [("h", b"1")]),
        (None, None, []),
        (None, b"v:b", []),
    ]


@pytest.mark.anyio
async def test_async_send_with_a_serializer_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = Counting(b"v:")
    async with (
        MemoryCluster(in_loop=True) as cluster,
        AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers, value_serializer=values, linger_ms=50
        ) as p,
    ):
        await (await p.send("t", "first", timestamp=T0))
        await (await p.send("t", "second", timestamp=T0))
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [await p.send("t", f"v{i}", timestamp=T0 + i) for i in range(3)]
        await p.flush()
        assert [(await f).offset for f in futures] == [2, 3, 4]
        records = cluster.records("t")
    assert values.calls == ["first", "second", "v0", "v1", "v2"]
    assert [r.value for r in records[2:]] == [b"v:v0", b"v:v1", b"v:v2"]


def test_serializer_errors_are_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(obj: Any) -> bytes:
        raise ValueError("no")

    calls = GeneralPathCalls(monkeypatch)
    with (
        MemoryCluster() as cluster,
        Producer(
            bootstrap_servers=cluster.bootstrap_servers,
            value_serializer=lambda v: v,
            key_serializer=failing,
        ) as p,
    ):
        p.send("t", b"first").result(10)
        p.send("t", b"second").result(10)
        calls.calls = 0
        with pytest.raises(SerializationError, match="the value must be bytes or None, not int"):
            p.send("t", 5)
        with pytest.raises(SerializationError, match=r"the key serializer failed: ValueError"):
            p.send("t", b"v", key="k")
        # a bad header is refused after serialization, by the general path, as before
        with pytest.raises(SerializationError, match="header 'h': value must be bytes"):
            p.send("t", b"v", headers=[("h", 1)])
        assert calls.calls == 1


def test_prepared_send_needs_the_flag() -> None:
    """send declines a producer's records when not plain, send_prepared when not prepared,
    in C and in Python."""
    for routes_type in (_accumulate.RouteState, append_state.RouteState):
        core = c_side()
        if routes_type is append_state.RouteState:
            r = core.routes
            core.routes = append_state.RouteState(
                r.metadata, r.accumulator, r.sticky, r.keyed_partition, r.plain, r.ignore_keys
            )
            core.routes.snapshot, core.routes.counts = r.snapshot, r.counts
        routes = core.routes
        assert routes.send_prepared("t1", b"v", None, T0, None, None, None) is None
        routes.prepared = True
        assert routes.send_prepared("t1", b"v", None, T0, None, None, None) is not None
        routes.plain = False
        assert routes.send("t1", b"v", None, T0) is None
        assert routes.send_prepared("t1", b"v", None, T0, None, None, None) is not None


# ---- transactions


@pytest.fixture
def txn_cluster() -> Iterator[str]:
    url = f"memory://prepared-{uuid.uuid4().hex[:8]}"
    try:
        yield url
    finally:
        close_cluster(url)


@pytest.mark.parametrize("routes_type", [_accumulate.RouteState, append_state.RouteState])
def test_send_prepared_takes_only_partitions_noted_for_the_transaction(
    routes_type: type,
) -> None:
    core = c_side()
    r = core.routes
    routes = routes_type(
        r.metadata, r.accumulator, r.sticky, r.keyed_partition, False, r.ignore_keys
    )
    routes.snapshot, routes.counts = r.snapshot, r.counts
    routes.prepared = True
    noted: set[tuple[str, int]] = set()
    routes.transaction = noted
    before = state(routes.accumulator)
    assert routes.send_prepared("t3", b"v", None, T0, 1, None, None) is None
    assert routes.send_prepared("t1", b"v", None, T0, None, None, None) is None
    assert state(routes.accumulator) == before
    noted.add(("t3", 1))
    future = routes.send_prepared("t3", b"v", None, T0, 1, None, None)
    assert future is not None and future._batch.tp == ("t3", 1)
    assert routes.send_prepared("t3", b"v", None, T0, 2, None, None) is None
    noted.clear()
    after = state(routes.accumulator)
    assert routes.send_prepared("t3", b"v", None, T0, 1, None, None) is None
    assert state(routes.accumulator) == after
    if routes_type is _accumulate.RouteState:
        with pytest.raises(TypeError, match="must be a set or None"):
            routes.transaction = frozenset()


def test_a_transactional_send_is_fast_only_to_a_partition_already_in_the_transaction(
    txn_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(txn_cluster, "t", 2)
    general = GeneralPathCalls(monkeypatch)
    with Producer(
        bootstrap_servers=txn_cluster, transactional_id="tx-fast", max_block_ms=10_000
    ) as p:
        p.init_transactions()
        manager = p._core.transactions.manager  # type: ignore[union-attr]
        assert p._core.routes.prepared and p._core.routes.transaction is manager.noted
        for name in ("a", "b"):
            p.begin_transaction()
            general.calls = 0
            for i in range(6):
                p.send("t", f"{name}{i}".encode(), partition=i % 2 if i < 4 else 0)
            # the first record to each partition took the general path (it added the
            # partition), the others the C send (without the extension, all the general)
            assert general.calls == (2 if accumulator._encode_plain is not None else 6)
            assert manager.noted == {("t", 0), ("t", 1)}
            p.commit_transaction()
            assert manager.noted == set()
    assert read_all(txn_cluster, "t", 2, "read_committed") == [
        (0, 0, b"a0"), (0, 1, b"a2"), (0, 2, b"a4"), (0, 3, b"a5"),
        (0, 5, b"b0"), (0, 6, b"b2"), (0, 7, b"b4"), (0, 8, b"b5"),
        (1, 0, b"a1"), (1, 1, b"a3"), (1, 3, b"b1"), (1, 4, b"b3"),
    ]  # fmt: skip


def test_a_transactional_send_outside_an_open_transaction_fails_as_before(
    txn_cluster: str,
) -> None:
    create(txn_cluster, "t", 1)
    serialized: list[Any] = []

    def serializer(obj: Any) -> bytes:
        serialized.append(obj)
        return bytes(obj)

    with Producer(
        bootstrap_servers=txn_cluster,
        transactional_id="tx-refused",
        max_block_ms=10_000,
        value_serializer=serializer,
    ) as p:
        with pytest.raises(IllegalStateError, match=r"before init_transactions\(\) completes"):
            p.send("t", b"early")
        p.init_transactions()
        with pytest.raises(IllegalStateError, match="no transaction is open"):
            p.send("t", b"before")
        p.begin_transaction()
        p.send("t", b"a0").result(10)
        p.send("t", b"a1")  # the C send: the partition is in the transaction
        p.abort_transaction()
        # after the abort: refused before the serializer runs, as before
        with pytest.raises(IllegalStateError, match="no transaction is open"):
            p.send("t", b"after-abort")
        p.begin_transaction()
        p.send("t", b"b0").result(10)
        manager = p._core.transactions.manager  # type: ignore[union-attr]
        assert manager.noted == {("t", 0)}
        manager.abortable(KafkaError("an abortable error"))
        with pytest.raises(KafkaError, match="an abortable error"):
            p.send("t", b"in-error")
        p.abort_transaction()
        p.begin_transaction()
        p.send("t", b"c0")
        p.commit_transaction()
    assert serialized == [b"a0", b"a1", b"b0", b"c0"]
    assert [value for _, _, value in read_all(txn_cluster, "t", 1, "read_committed")] == [b"c0"]


# ---- the noted partitions: always among those the transaction has or is adding

_events = st.lists(
    st.sampled_from(
        [("add", p) for p in range(3)]
        + [("take",)] * 2
        + [("answer", code) for code in (0, 0, 15, 29, 55, 90, 120)]
        + [("requeue",)]
        + [("begin",)] * 3
        + [("commit",), ("abort",), ("complete",), ("abortable",), ("fatal",)]
    ),
    max_size=40,
)


@settings(max_examples=1500, deadline=None)
@given(_events)
def test_noted_partitions_stay_among_the_transactions(events: list[tuple[Any, ...]]) -> None:
    manager = TransactionManager("tx", 60_000)
    manager.begin_init()
    manager.on_init_producer_id(0, 7, 3, version=4, bump=False)
    noted = manager.noted
    for event in events:
        try:
            match event:
                case ("add", p):
                    if manager.state is ProducerTxnState.IN_TRANSACTION:
                        manager.add_partition(("t", p))
                case ("take",):
                    manager.take_partitions(3)
                case ("answer", code):
                    if manager.adding:
                        manager.on_add_partitions(dict.fromkeys(manager.adding, code))
                case ("requeue",):
                    manager.requeue_partitions()
                case ("begin",):
                    manager.begin_transaction()
                case ("commit",):
                    manager.begin_commit()
                case ("abort",):
                    manager.begin_abort()
                case ("complete",):
                    if manager.is_completing:
                        manager.complete()
                case ("abortable",):
                    manager.abortable(KafkaError("x"))
                case ("fatal",):
                    manager.fatal(KafkaError("x"))
        except (IllegalStateError, KafkaError):
            pass
        assert manager.noted is noted
        assert noted <= manager.partitions | manager.new_partitions | manager.adding, event
