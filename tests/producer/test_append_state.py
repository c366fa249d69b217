"""The producer's append state in C (kafkette.producer._accumulate) against pure Python.

With the extension, ``ProducerBatch`` and ``RecordAccumulator`` keep the fields
the C append works on in C types (their bases); without it
(``KAFKETTE_NO_EXTENSIONS=1``) in the Python classes of
``kafkette.producer.append_state``. Two copies of the accumulator module are
loaded here, whatever the environment says: one on the C types with the C
append and record encoder, one on the Python bases with neither, as the
fallback runs. Fed the same records (each the way the producer sends it), both
must hold the same state after every step and build the same bytes.
"""

from __future__ import annotations

import gc
import importlib.util
import random
import sys
import weakref
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.client.config import ProducerConfig
from kafkette.producer import _accumulate, accumulator, append_state
from kafkette.producer import futures as futures_module
from kafkette.producer import speedups as producer_speedups
from kafkette.producer.core import ProducerCore
from kafkette.producer.futures import RecordFuture
from kafkette.producer.partitioner import StickyPartitioner, keyed_partition
from kafkette.protocol.extensions import extensions_disabled
from kafkette.protocol.records import _speedups
from kafkette.protocol.records import speedups as record_speedups


def _load_copy(name: str, real: str, replace: dict[str, ModuleType]) -> ModuleType:
    """The source of module ``real`` executed again as ``name``, importing the modules
    in ``replace`` instead of those of their names."""
    spec = importlib.util.find_spec(real)
    assert spec is not None and spec.origin is not None
    copy = importlib.util.spec_from_file_location(name, spec.origin)
    assert copy is not None and copy.loader is not None
    module = importlib.util.module_from_spec(copy)
    with pytest.MonkeyPatch.context() as patch:
        for replaced, replacement in replace.items():
            patch.setitem(sys.modules, replaced, replacement)
        copy.loader.exec_module(module)
    return module


def _load_accumulator(name: str, c: bool) -> ModuleType:
    """kafkette/producer/accumulator.py executed again, on the C types with the C append
    and record encoder, or on the Python ones without them (futures.py too, when the
    producer's own RecordFuture is on the other base)."""
    future_state: type = _accumulate.FutureState if c else append_state.FutureState
    c_append = _accumulate.AccumulatorState.append_open
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(producer_speedups, "FutureState", future_state)
        if c:
            patch.setattr(producer_speedups, "BatchState", _accumulate.BatchState)
            patch.setattr(producer_speedups, "AccumulatorState", _accumulate.AccumulatorState)
            patch.setattr(producer_speedups, "append_open", c_append)
            patch.setattr(producer_speedups, "bind", _accumulate.bind)
            patch.setattr(producer_speedups, "build_plain", _accumulate.build_plain)
            patch.setattr(record_speedups, "encode_record", _speedups.encode_record)
        else:
            patch.setattr(producer_speedups, "BatchState", append_state.BatchState)
            patch.setattr(producer_speedups, "AccumulatorState", append_state.AccumulatorState)
            patch.setattr(producer_speedups, "append_open", None)
            patch.setattr(producer_speedups, "bind", None)
            patch.setattr(producer_speedups, "build_plain", None)
            patch.setattr(record_speedups, "encode_record", None)
        futures = futures_module
        if RecordFuture.__bases__ != (future_state,):
            futures = _load_copy(f"{name}_futures", "kafkette.producer.futures", {})
        return _load_copy(
            name, "kafkette.producer.accumulator", {"kafkette.producer.futures": futures}
        )


c_accumulator = _load_accumulator("_c_accumulator", c=True)
python_accumulator = _load_accumulator("_python_accumulator", c=False)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_copies_run_on_their_bases() -> None:
    assert python_accumulator.RecordFuture.__bases__ == (append_state.FutureState,)
    assert c_accumulator.RecordFuture.__bases__ == (_accumulate.FutureState,)
    assert python_accumulator.ProducerBatch.__bases__[0] is append_state.BatchState
    assert python_accumulator.RecordAccumulator.__bases__ == (append_state.AccumulatorState,)
    assert python_accumulator.append_open is None
    assert c_accumulator.ProducerBatch.__bases__[0] is _accumulate.BatchState
    assert c_accumulator.RecordAccumulator.__bases__ == (_accumulate.AccumulatorState,)
    assert c_accumulator.append_open is _accumulate.AccumulatorState.append_open


def test_the_producer_uses_the_c_types_unless_told_not_to() -> None:
    """The accumulator module's bases follow KAFKETTE_NO_EXTENSIONS (the extension is
    built in CI, scripts/setup.sh)."""
    c = not extensions_disabled()
    assert RecordFuture.__bases__ == (
        (_accumulate.FutureState,) if c else (append_state.FutureState,)
    )
    assert accumulator.ProducerBatch.__bases__ == (
        (_accumulate.BatchState,) if c else (append_state.BatchState,)
    ) + (futures_module.BatchResult,)
    assert accumulator.RecordAccumulator.__bases__ == (
        (_accumulate.AccumulatorState,) if c else (append_state.AccumulatorState,)
    )
    assert producer_speedups.EXTENSION_USED is c


def send(acc: Any, module: ModuleType, tp: tuple[str, int], ts: int, key: Any, value: Any) -> Any:
    """A record the way ProducerCore sends it: the C append, the plain method, the general one."""
    topic, partition = tp
    if module.append_open is not None:
        future = module.append_open(acc, topic, partition, ts, key, value)
        if future is not None:
            return future
    future = acc.append_plain(topic, partition, ts, key, value)
    if future is None:
        future = acc.append(topic, partition, ts, key, value, block=False)
    return future


def state(acc: Any) -> tuple[Any, ...]:
    """Every field of the append state, and the batches' own."""
    batches = [
        (
            tp,
            None if b.buffer is None else bytes(b.buffer),
            b.count,
            b.base_timestamp,
            b.max_timestamp,
            b.size,
            b.reserved,
            b.full,
            b.partition,
        )
        for tp, queue in acc._queues.items()
        for b in queue
    ]
    fields = (acc._used, acc.buffer_memory, acc.batch_size, acc._closed, acc._wake_pending)
    return fields, batches


def futures(found: Iterator[RecordFuture]) -> list[tuple[int, int]]:
    return [(f._index, f._timestamp) for f in found]


_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("send"),
            st.integers(min_value=0, max_value=2),  # partition
            st.integers(min_value=0, max_value=2**40),  # timestamp
            st.one_of(st.none(), st.binary(max_size=30)),
            st.one_of(st.none(), st.binary(max_size=200)),
        ),
        st.tuples(st.just("ready")),
        st.tuples(st.just("drain"), st.integers(min_value=0, max_value=2)),
        st.tuples(st.just("complete")),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=100, deadline=None)
@given(_steps, st.integers(min_value=600, max_value=5_000))
def test_c_and_python_state_agree_after_every_step(
    steps: list[tuple[Any, ...]], buffer_memory: int
) -> None:
    """Same futures, same fields, same wake-ups, same batch bytes; a record that does not
    fit in buffer.memory is refused the same way (BufferFull) by both."""
    sides: list[tuple[ModuleType, Any, list[int], list[Any]]] = []
    for module in (c_accumulator, python_accumulator):
        woken: list[int] = []
        acc = module.RecordAccumulator(
            batch_size=400, linger_ms=5, buffer_memory=buffer_memory, clock=FakeClock()
        )
        acc.wakeup = lambda woken=woken: woken.append(1)
        sides.append((module, acc, woken, []))
    for step in steps:
        outcomes = []
        for module, acc, woken, drained in sides:
            if step[0] == "send":
                _, partition, ts, key, value = step
                try:
                    outcome: Any = futures(
                        iter([send(acc, module, ("t", partition), ts, key, value)])
                    )
                except module.BufferFull as full:
                    outcome = ("full", full.size)
            elif step[0] == "ready":
                outcome = acc.ready(0)
            elif step[0] == "drain":
                taken = acc.drain([("t", step[1])], 1 << 30)
                drained.extend(taken)
                outcome = [(b.full, bytes(b.build())) for b in taken]
            else:
                outcome = [b.record_count for b in drained]
                for batch in drained:
                    acc.complete(batch, 0)
                drained.clear()
            outcomes.append((outcome, state(acc), len(woken)))
        assert outcomes[0] == outcomes[1], step
    c_acc, py_acc = sides[0][1], sides[1][1]
    tps = [("t", p) for p in range(3)] * len(steps)
    c_built = [bytes(b.build()) for b in c_acc.drain(tps, 1 << 30)]
    assert c_built == [bytes(b.build()) for b in py_acc.drain(tps, 1 << 30)]


def test_the_c_fields_are_typed() -> None:
    """A C field takes only its type: an int field refuses a float, a flag refuses an int."""
    acc = c_accumulator.RecordAccumulator()
    batch = c_accumulator.ProducerBatch("t", 0, 0, 0.0, 5)
    for obj, name, wrong in (
        (acc, "_used", 1.5),
        (acc, "buffer_memory", "1"),
        (acc, "_closed", 1),
        (acc, "_wake_pending", None),
        (batch, "size", 2.0),
        (batch, "full", 0),
        (batch, "max_timestamp", None),
    ):
        before = getattr(obj, name)
        with pytest.raises(TypeError):
            setattr(obj, name, wrong)
        assert getattr(obj, name) == before
    with pytest.raises(OverflowError):
        batch.max_timestamp = 1 << 63


def test_the_c_types_hold_their_fields_in_c() -> None:
    """The Python classes add no slot of the same name over the C types' fields."""
    for cls, base in (
        (c_accumulator.RecordFuture, _accumulate.FutureState),
        (c_accumulator.ProducerBatch, _accumulate.BatchState),
        (c_accumulator.RecordAccumulator, _accumulate.AccumulatorState),
        (_accumulate.RouteState, _accumulate.RouteState),
    ):
        own = set(cls.__dict__.get("__slots__", ()))
        python_fields = set(getattr(append_state, base.__name__).__slots__)
        assert python_fields <= set(dir(base))
        assert not own & python_fields


def test_a_cycle_through_the_wakeup_is_collected() -> None:
    """The C types take part in garbage collection (the sender's wake-up refers back)."""

    class Holder:
        acc: Any = None

        def wake(self) -> None:
            pass

    holder = Holder()
    acc = c_accumulator.RecordAccumulator()
    acc.wakeup = holder.wake
    holder.acc = acc
    assert acc.append("t", 0, 1, None, b"v") is not None
    gone = weakref.ref(holder)
    del holder, acc
    gc.collect()
    assert gone() is None


class _Marker(Exception):
    pass


def _error_reaching(batch: Any) -> weakref.ref[_Marker]:
    """Give ``batch`` an error whose traceback reaches it back (this call's frame holds
    it): a reference cycle through the batch; a weak reference to the error."""
    try:
        raise _Marker
    except _Marker as exc:
        error = exc
    batch.error = error
    return weakref.ref(error)


def test_a_c_batch_starts_untracked_and_a_cycle_through_it_is_collected() -> None:
    """A new batch (C) is not tracked by the garbage collector: nothing it refers to can
    refer back. Given an error, a callback list, an event, parts or a parent, it is
    tracked again, and a cycle through it collected."""
    batch = c_accumulator.ProducerBatch("t", 0, 0, 0.0, 5)
    assert not gc.is_tracked(batch)
    batch.last_error = None
    batch.buffer = bytearray(b"x" * 100)
    assert not gc.is_tracked(batch)
    for name in ("error", "last_error", "_event", "_async_event", "_callbacks", "_parts"):
        other = c_accumulator.ProducerBatch("t", 0, 0, 0.0, 5)
        setattr(other, name, [])
        assert gc.is_tracked(other), name
        assert getattr(other, name) == []
    part = c_accumulator.ProducerBatch("t", 0, 0, 0.0, 5)
    batch.split([(0, part)])
    assert gc.is_tracked(batch) and gc.is_tracked(part)
    lone = c_accumulator.ProducerBatch("t", 0, 0, 0.0, 5)
    error = _error_reaching(lone)
    del lone
    gc.collect()
    assert error() is None


# ---- RouteState: what the common send needs of the producer


class FakeSnapshot:
    """A metadata snapshot that knows only partition counts (0: the topic is unknown)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic) or None


def route_side(routes_type: type, ignore_keys: bool) -> Any:
    """A producer core that never connects, whose routes is a ``routes_type`` over an
    accumulator on the C types (the C RouteState takes no other) and a seeded sticky
    partitioner."""
    config = ProducerConfig.from_user(
        bootstrap_servers="127.0.0.1:9", partitioner_ignore_keys=ignore_keys
    )
    core = ProducerCore(config, clock=FakeClock())
    acc = c_accumulator.RecordAccumulator(
        batch_size=400, linger_ms=5, buffer_memory=1 << 20, clock=FakeClock()
    )
    sticky = StickyPartitioner(400, random.Random(11))
    core.routes = routes_type(core.client.metadata, acc, sticky, keyed_partition, True, ignore_keys)
    return core


def route_fields(core: Any) -> tuple[Any, ...]:
    routes = core.routes
    return (
        routes.snapshot is core.client.metadata.snapshot,
        type(routes.counts),
        dict(routes.counts),
        routes.plain,
        routes.ignore_keys,
        dict(routes.sticky._current),
    )


def send_as_the_producer(core: Any, topic: str, key: Any, value: Any, ts: Any) -> Any:
    """RouteState.send, else the general path (ProducerCore.route, which refreshes the
    cached partition counts, then the accumulator's append): where the record went,
    None when the topic is not known yet, or the error."""
    future = core.routes.send(topic, value, key, ts)
    if future is None:
        try:
            partition, key, value, _, ts = core.route(topic, value, key, None, None, ts)
        except Exception as exc:
            return type(exc), str(exc)
        if partition is None:
            return None
        future = core.routes.accumulator.append(topic, partition, ts, key, value, block=False)
    return future._batch.partition, future._index, future._timestamp


_route_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("metadata"),
            st.integers(min_value=0, max_value=4),  # t1's partitions (0: unknown)
            st.integers(min_value=0, max_value=4),  # t3's
        ),
        st.tuples(
            st.just("send"),
            st.sampled_from(["t1", "t3", "t9"]),
            st.one_of(st.none(), st.binary(max_size=8), st.just("text")),
            st.one_of(st.none(), st.binary(max_size=120)),
            st.one_of(st.integers(min_value=0, max_value=2**41), st.just(-1), st.just(2**64)),
        ),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(_route_steps, st.booleans())
def test_c_and_python_route_state_agree_after_every_step(
    steps: list[tuple[Any, ...]], ignore_keys: bool
) -> None:
    """Metadata updates and sends, each the way the producer does it: the same route
    state (the sticky partitioner's included), the same partitions and futures, the
    same batches."""
    sides = [
        route_side(_accumulate.RouteState, ignore_keys),
        route_side(append_state.RouteState, ignore_keys),
    ]
    for step in steps:
        outcomes = []
        for core in sides:
            if step[0] == "metadata":
                core.client.metadata.snapshot = FakeSnapshot({"t1": step[1], "t3": step[2]})
                outcome: Any = None
            else:
                _, topic, key, value, ts = step
                outcome = send_as_the_producer(core, topic, key, value, ts)
            outcomes.append((outcome, route_fields(core), state(core.routes.accumulator)))
        assert outcomes[0] == outcomes[1], step
    c_acc, py_acc = (core.routes.accumulator for core in sides)
    tps = [(t, p) for t in ("t1", "t3") for p in range(4)] * len(steps)
    c_built = [bytes(b.build()) for b in c_acc.drain(tps, 1 << 30)]
    assert c_built == [bytes(b.build()) for b in py_acc.drain(tps, 1 << 30)]


def test_the_c_route_state_is_typed() -> None:
    """A flag refuses anything but a bool, the counts anything but a dict, the
    accumulator anything but the C accumulator; the constructor checks the same."""
    acc = c_accumulator.RecordAccumulator()
    routes = _accumulate.RouteState(
        object(), acc, StickyPartitioner(400), keyed_partition, True, False
    )
    assert (routes.snapshot, routes.counts, routes.accumulator) == (None, {}, acc)
    for name, wrong in (
        ("plain", 1),
        ("ignore_keys", None),
        ("counts", [("t", 1)]),
        ("accumulator", python_accumulator.RecordAccumulator()),
    ):
        before = getattr(routes, name)
        with pytest.raises(TypeError):
            setattr(routes, name, wrong)
        assert getattr(routes, name) == before
    with pytest.raises(TypeError):
        _accumulate.RouteState(object(), acc, None, keyed_partition, 1, False)
    with pytest.raises(TypeError):
        _accumulate.RouteState(object(), object(), None, keyed_partition, True, False)


def test_an_uninitialised_route_state_sends_nothing() -> None:
    routes = _accumulate.RouteState.__new__(_accumulate.RouteState)
    assert routes.send("t", b"v", None, 1) is None
    routes.plain = True
    assert routes.send("t", b"v", None, 1) is None


def test_send_plain_refuses_a_core_without_c_routes() -> None:
    class Core:
        routes = append_state.RouteState.__new__(append_state.RouteState)

    with pytest.raises(TypeError, match="not a RouteState"):
        _accumulate.send_plain(Core(), "t", b"v", None, 1)
    with pytest.raises(AttributeError):
        _accumulate.send_plain(object(), "t", b"v", None, 1)
