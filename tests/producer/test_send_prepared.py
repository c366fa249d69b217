"""Producers with serializers take the C send too (``routes.send_prepared``), once
``ProducerCore.prepare_record`` serialized the record.

A serializer is called once per record, with the same arguments and errors as on
the general path, which takes the serialized bytes when the C send declines.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkette import AsyncProducer, Producer
from kafkette.errors import SerializationError
from kafkette.producer import _accumulate, append_state
from kafkette.producer.core import ProducerCore
from kafkette.producer.futures import RecordMetadata
from kafkette.testing import MemoryCluster
from tests.producer.test_send_fast_path import refuse_the_general_path
from tests.producer.test_send_headers import c_side

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
