"""The async sends waiting for room in ``buffer.memory``, woken in the order they came.

A send that finds the buffer full takes a place at the end of the queue and waits on an
event of its own. When the accumulator reports room (``on_space``), the first waiter is
woken; it appends if its record fits (else waits again, keeping its place), and when it
leaves the queue (appended, timed out or cancelled) it wakes the next one, which tries in
turn. So every waiter is woken once room frees, in order, and a large record is not
starved by small ones: a send that finds others waiting queues behind them (the caller
checks :attr:`BufferWaiters.queue` before appending). The Java producer's ``BufferPool``
keeps its waiting conditions in such a queue too.

``on_space`` is the accumulator's only while someone waits: an acknowledged batch then
costs no call when nobody does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

from kafkette.producer.accumulator import RecordAccumulator


class Waiter:
    """One send's place in the queue, and the event that wakes it."""

    __slots__ = ("_event", "_new_event")

    def __init__(self, new_event: Callable[[], anyio.Event]) -> None:
        self._new_event = new_event
        self._event = new_event()

    def wake(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        """Until woken (cancellable); the next wait needs a new wake."""
        await self._event.wait()
        self._event = self._new_event()


class BufferWaiters:
    """The queue of the sends waiting for room in one accumulator (one event loop's)."""

    __slots__ = ("_accumulator", "_new_event", "queue")

    def __init__(
        self, accumulator: RecordAccumulator, new_event: Callable[[], anyio.Event]
    ) -> None:
        self._accumulator = accumulator
        self._new_event = new_event
        self.queue: deque[Waiter] = deque()
        """The waiters, first to be woken at the left; empty when nobody waits."""

    def _space_freed(self) -> None:
        if self.queue:
            self.queue[0].wake()

    @contextmanager
    def place(self) -> Iterator[Waiter]:
        """A place at the end of the queue, left on exit (waking the next waiter if it
        was the first: it may fit in what this one did not take)."""
        queue = self.queue
        waiter = Waiter(self._new_event)
        starts_queue = not queue
        if starts_queue:
            self._accumulator.on_space = self._space_freed
        queue.append(waiter)
        try:
            wakeup = self._accumulator.wakeup
            if starts_queue and wakeup is not None:
                wakeup()  # the accumulator is exhausted: its lingering batches go now
            yield waiter
        finally:
            first = queue[0] is waiter
            queue.remove(waiter)
            if not queue:
                self._accumulator.on_space = None
            elif first:
                queue[0].wake()
