"""A sync producer's linger alarm (#30): a new batch tells the accumulator's ``wake_at`` the
end of its linger instead of waking the sender; a full batch, a flush or a refusal still
wakes it at once. The alarm itself is a Linux timerfd in the producer's event loop."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from kafkette import Producer
from kafkette.client.linger_alarm import LingerAlarm
from kafkette.producer.accumulator import RecordAccumulator
from tests.brokers import BrokerProcess
from tests.producer.test_accumulator import FakeClock, make

LINUX = sys.platform == "linux"


class Told:
    """The accumulator's ``wakeup`` and ``wake_at``, recorded; ``wake_at`` answers ``takes``."""

    def __init__(self, acc: RecordAccumulator, *, takes: bool = True) -> None:
        self.wakes = 0
        self.deadlines: list[float] = []
        self.takes = takes
        acc.wakeup = self.wake
        acc.wake_at = self.at

    def wake(self) -> None:
        self.wakes += 1

    def at(self, deadline_ms: float) -> bool:
        self.deadlines.append(deadline_ms)
        return self.takes


@pytest.mark.parametrize("plain", [False, True], ids=["append", "append_plain"])
def test_a_new_batch_tells_its_linger_end_instead_of_waking_the_sender(plain: bool) -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=200)
    told = Told(acc)

    def append(partition: int, value: bytes) -> None:
        if not plain or acc.append_plain("t", partition, 1, None, value) is None:
            acc.append("t", partition, 1, None, value)

    append(0, b"a")
    clock.now += 1.5
    append(1, b"b")
    append(0, b"c")  # into the open batch: nothing to tell
    assert (told.deadlines, told.wakes) == ([1005.0, 1006.5], 0)
    assert acc.ready(clock()) == ([], 3.5)
    # a record that does not fit closes the batch before it: that one is ready, so the
    # sender is woken now
    append(0, b"x" * 150)
    assert (told.deadlines, told.wakes) == ([1005.0, 1006.5], 1)
    assert acc.ready(clock()) == ([("t", 0)], 5.0)


def test_a_batch_filled_up_wakes_the_sender_at_once() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=100)
    told = Told(acc)
    acc.append("t", 0, 1, None, b"x" * 60)  # a batch of one record, full
    assert (told.deadlines, told.wakes) == ([], 1)
    assert acc.ready(clock()) == ([("t", 0)], None)


def test_a_refused_deadline_wakes_the_sender_at_once() -> None:
    clock = FakeClock()
    acc = make(clock)
    told = Told(acc, takes=False)
    acc.append("t", 0, 1, None, b"a")
    acc.append("t", 1, 1, None, b"b")  # woken already, not looked yet: told nothing
    assert (told.deadlines, told.wakes) == ([1005.0], 1)


def test_no_deadline_while_flushing_without_linger_or_while_a_wake_up_is_pending() -> None:
    clock = FakeClock()
    acc = make(clock)
    told = Told(acc)
    acc.begin_flush()  # wakes the sender: a flush makes every batch ready
    acc.ready(clock())
    acc.append("t", 0, 1, None, b"a")
    assert (told.deadlines, told.wakes) == ([], 2)
    acc.end_flush()
    acc.append("t", 1, 1, None, b"b")  # the flush's wake-up is pending still
    assert (told.deadlines, told.wakes) == ([], 2)
    acc.ready(clock())
    acc.append("t", 2, 1, None, b"c")
    assert (told.deadlines, told.wakes) == ([1005.0], 2)

    lingerless = make(clock, linger_ms=0)
    told = Told(lingerless)
    lingerless.append("t", 0, 1, None, b"a")
    assert (told.deadlines, told.wakes) == ([], 1)


async def _fired_at(arm: list[float], cancel: bool = False, allowed: bool = True) -> list[float]:
    """Arm a new alarm at each deadline of ``arm`` (ms from now) in turn; the times (ms
    from now) its ``fire`` ran within 100 ms of the last deadline."""
    fired: list[float] = []
    start = time.monotonic() * 1000
    alarm = LingerAlarm.open(lambda: fired.append(time.monotonic() * 1000 - start), lambda: allowed)
    assert alarm is not None
    try:
        assert all(alarm.at(start + ms) for ms in arm) == allowed
        if cancel:
            alarm.cancel()
        await asyncio.sleep((max(arm) + 100) / 1000)
    finally:
        alarm.close()
    return fired


async def _opened() -> LingerAlarm | None:
    return LingerAlarm.open(lambda: None, lambda: True)


def test_the_alarm_fires_once_at_its_earliest_deadline_not_before() -> None:
    """On Linux; elsewhere no alarm opens (a timerfd is Linux's)."""
    if not LINUX:
        assert asyncio.run(_opened()) is None
        return
    fired = asyncio.run(_fired_at([30, 60, 20]))
    assert len(fired) == 1 and 20 <= fired[0] < 30


def test_a_cancelled_or_disallowed_alarm_does_not_fire() -> None:
    """On Linux; elsewhere no alarm opens."""
    if not LINUX:
        assert asyncio.run(_opened()) is None
        return
    assert asyncio.run(_fired_at([20], cancel=True)) == []
    assert asyncio.run(_fired_at([20], allowed=False)) == []


def test_a_sync_producer_sends_a_lingering_batch_when_its_linger_ends(
    memory_broker: BrokerProcess,
) -> None:
    """Not before ``linger.ms`` (the alarm is no early wake-up), and without waiting for
    it once the batch is full."""
    with Producer(bootstrap_servers=memory_broker.bootstrap, linger_ms=300) as producer:
        assert (producer._alarm is not None) == LINUX
        producer.send("linger-alarm", b"first").result(10)  # the topic made, a producer id
        sent = time.monotonic()
        lingered = producer.send("linger-alarm", b"second", partition=0)
        assert lingered.result(10).offset == 1
        assert time.monotonic() - sent >= 0.3
    with Producer(
        bootstrap_servers=memory_broker.bootstrap, linger_ms=60_000, batch_size=100
    ) as producer:
        producer.send("linger-alarm", b"third", partition=0)
        producer.flush(10)
        sent = time.monotonic()
        full = producer.send("linger-alarm", b"x" * 100, partition=0)
        assert full.result(10).offset == 3
        assert time.monotonic() - sent < 30


def test_an_alarm_the_kernel_refuses_is_not_counted_on() -> None:
    """A ``timerfd_settime`` that fails (-1) answers False, so the caller wakes the loop at
    once, and leaves nothing armed: the next deadline, even a later one, tries again."""
    calls: list[int] = []

    def refusing(fd: int, flags: int, new: object, old: object) -> int:
        calls.append(fd)
        return -1

    async def main() -> None:
        read_fd, write_fd = os.pipe()  # a descriptor the loop can watch
        try:
            loop = asyncio.get_running_loop()
            alarm = LingerAlarm(read_fd, refusing, loop, lambda: None, lambda: True)
            assert alarm.at(1_000.0) is False
            assert alarm.at(2_000.0) is False
            assert calls == [read_fd, read_fd]
            loop.remove_reader(read_fd)
        finally:
            os.close(read_fd)
            os.close(write_fd)

    asyncio.run(main())
