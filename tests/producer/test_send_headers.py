"""Records with headers take the producers' C send (``routes.send(..., headers)``).

The C send encodes the headers section (a varint count, then each header's key length,
UTF-8 key, value length or -1, value) into the record as the general path
(``ProducerCore.route``, then ``RecordAccumulator.append``) writes it, and reserves the
bytes ``record_size`` counts for them: fed the same records, both must cut the same
batches, byte for byte, and account the same ``buffer.memory``. Headers of any other
shape or type are the general path's, which accepts or refuses them as before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette import AsyncProducer, Producer
from kafkette.errors import SerializationError
from kafkette.producer import _accumulate
from kafkette.producer.core import _headers
from kafkette.protocol.records import RecordBatch
from kafkette.testing import MemoryCluster
from tests.producer.test_append_state import FakeSnapshot, route_side, state
from tests.producer.test_send_fast_path import refuse_the_general_path

T0 = 1_700_000_000_000
COUNTS = {"t1": 1, "t3": 3}


def c_side() -> Any:
    """A core whose routes is the C RouteState over an accumulator on the C types, the
    partition counts of t1 and t3 cached (batch.size 400, a seeded sticky partitioner)."""
    core = route_side(_accumulate.RouteState, False)
    snapshot = FakeSnapshot(COUNTS)
    core.client.metadata.snapshot = snapshot
    core.routes.snapshot = snapshot
    core.routes.counts = dict(COUNTS)
    return core


def general_send(core: Any, topic: str, key: Any, value: Any, headers: Any, ts: int) -> Any:
    """The general path: ProducerCore.route (headers checked and converted), then the
    accumulator's append."""
    partition, key, value, header_list, ts = core.route(topic, value, key, headers, None, ts)
    return core.routes.accumulator.append(
        topic, partition, ts, key, value, header_list, block=False
    )


_values = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=8))
_pairs = st.lists(st.tuples(st.text(max_size=12), _values), max_size=5)
_headers_arg = st.one_of(
    st.none(),
    _pairs,
    _pairs.map(tuple),
    st.dictionaries(st.text(max_size=12), _values, max_size=4),
)
_sends = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t3"]),
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=300)),
        _headers_arg,
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1,
    max_size=50,
)


@settings(max_examples=150, deadline=None)
@given(_sends)
def test_the_c_send_builds_the_general_paths_batches(
    sends: list[tuple[str, Any, Any, Any, int]],
) -> None:
    c_core, py_core = c_side(), c_side()
    for topic, key, value, headers, ts in sends:
        c_future = c_core.routes.send(topic, value, key, ts, None, None, headers)
        assert c_future is not None  # every shape drawn here is the C send's
        py_future = general_send(py_core, topic, key, value, headers, ts)
        assert (c_future._batch.partition, c_future._index, c_future._timestamp) == (
            py_future._batch.partition,
            py_future._index,
            py_future._timestamp,
        )
        assert state(c_core.routes.accumulator) == state(py_core.routes.accumulator)
    tps = [(t, p) for t, count in COUNTS.items() for p in range(count)] * len(sends)
    c_built = [bytes(b.build()) for b in c_core.routes.accumulator.drain(tps, 1 << 30)]
    py_built = [bytes(b.build()) for b in py_core.routes.accumulator.drain(tps, 1 << 30)]
    assert c_built == py_built
    records = [r for data in c_built for r in RecordBatch.from_buffer(data)]
    expected = [(key, value, _headers(headers)) for _, key, value, headers, _ in sends]
    got = [(r.key, r.value, list(r.headers)) for r in records]
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def _generated() -> Iterator[tuple[str, bytes]]:
    yield ("k", b"v")


@pytest.mark.parametrize(
    "headers",
    [
        [("k", 5)],
        [(1, b"x")],
        [("a",)],
        [("k", b"v", 3)],
        [["k", b"v"]],
        [("\ud800", b"x")],
        [("k", "\udc80")],
        [("k", bytearray(b"x"))],
        pytest.param([("k", memoryview(b"x"))], id="a memoryview value"),
        OrderedDict([("k", b"v")]),
        {"k": 5},
        pytest.param(_generated(), id="a generator"),
        "kv",
    ],
    ids=repr,
)
def test_the_c_send_leaves_other_headers_to_the_general_path(headers: Any) -> None:
    core = c_side()
    before = state(core.routes.accumulator)
    assert core.routes.send("t1", b"v", None, T0, None, None, headers) is None
    assert state(core.routes.accumulator) == before


def test_no_headers_and_empty_headers_are_the_plain_record() -> None:
    core = c_side()
    empty: tuple[Any, ...] = (None, [], (), {})
    for headers in empty:
        assert core.routes.send("t1", b"v", None, T0, None, None, headers) is not None
    (batch,) = core.routes.accumulator.drain([("t1", 0)], 1 << 30)
    assert [list(r.headers) for r in RecordBatch.from_buffer(bytes(batch.build()))] == [[]] * 4


HEADERS: list[tuple[Any, list[tuple[str, bytes | None]]]] = [
    ([("trace-id", b"0123456789abcdef"), ("source", b"bench")], []),
    ((("k", None), ("k", b"")), []),
    ({"é-ключ": "välue", "null": None}, []),
    ([("big", b"x" * 600)], []),
]
"""Headers as given, and (filled below) as a consumer reads them back."""
for given_, expected_ in HEADERS:
    expected_.extend(_headers(given_))


def test_sync_send_with_headers_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50) as p,
    ):
        p.send("t", b"first", timestamp=T0).result(10)  # waits for the topic's metadata
        p.send("t", b"second", timestamp=T0).result(10)  # caches its partition count
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [
                p.send("t", b"v%d" % i, headers=headers, timestamp=T0 + i)
                for i, (headers, _) in enumerate(HEADERS)
            ]
        p.flush()
        assert [f.result(0).offset for f in futures] == [2, 3, 4, 5]
        records = cluster.records("t")
    assert [(r.value, list(r.headers)) for r in records[2:]] == [
        (b"v%d" % i, expected) for i, (_, expected) in enumerate(HEADERS)
    ]


@pytest.mark.anyio
async def test_async_send_with_headers_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        MemoryCluster(in_loop=True) as cluster,
        AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50) as p,
    ):
        await (await p.send("t", b"first", timestamp=T0))
        await (await p.send("t", b"second", timestamp=T0))
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [
                await p.send("t", b"v%d" % i, headers=headers, timestamp=T0 + i)
                for i, (headers, _) in enumerate(HEADERS)
            ]
        await p.flush()
        assert [(await f).offset for f in futures] == [2, 3, 4, 5]
        records = cluster.records("t")
    assert [(r.value, list(r.headers)) for r in records[2:]] == [
        (b"v%d" % i, expected) for i, (_, expected) in enumerate(HEADERS)
    ]


def test_bad_headers_raise_as_before() -> None:
    """What the C send declines, the general path refuses with its own errors."""
    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers) as p,
    ):
        p.send("t", b"first").result(10)
        with pytest.raises(SerializationError, match="header 'k': value must be bytes, str or"):
            p.send("t", b"v", headers=[("k", 5)])
        with pytest.raises(SerializationError, match="a header key must be a str, not int"):
            p.send("t", b"v", headers=[(1, b"x")])  # type: ignore[list-item]
        with pytest.raises(SerializationError, match=r"must be a \(key, value\) pair"):
            p.send("t", b"v", headers=[("a",)])  # type: ignore[list-item]
        with pytest.raises(UnicodeEncodeError):
            p.send("t", b"v", headers=[("k", "\udc80")])
        # accepted by the general path: a bytearray value, a list pair, a generator
        for headers in ([("k", bytearray(b"x"))], [["k", b"x"]], _generated()):
            p.send("t", b"v", headers=headers).result(10)  # type: ignore[arg-type]
        records = cluster.records("t")
    assert [list(r.headers) for r in records[1:]] == [[("k", b"x")]] * 2 + [[("k", b"v")]]
