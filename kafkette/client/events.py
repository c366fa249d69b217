"""Events for hot loops, without anyio's backend lookup on each one.

``anyio.Event()`` finds the running backend on every call (through sniffio
and the current task), which costs about a microsecond: more than the event
itself. Code that makes an event per request or per loop turn gets the
backend's event class once, in the event loop, with :func:`event_factory`.

Also the event loop a sync client runs in its thread (:func:`fine_timer_loop`):
asyncio's, with timers that fire when due rather than on epoll's next whole
millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import selectors
import sys
from collections.abc import Callable

import anyio

FINE_WAIT_S = 0.05
"""A :func:`fine_timer_loop` times waits shorter than this to the microsecond (a linger, a
backoff), longer ones to the millisecond as epoll does."""
_SELECT_FD_LIMIT = 1024
"""``select()`` takes no descriptor numbered this high (FD_SETSIZE)."""
_PR_SET_TIMERSLACK = 29
"""prctl's option for the calling thread's timer slack (<linux/prctl.h>)."""


def event_factory() -> Callable[[], anyio.Event]:
    """A callable making events of the running backend (call it in the event loop)."""
    return type(anyio.Event())


def call_soon_factory() -> Callable[[Callable[[], object]], object]:
    """A function scheduling a plain callback to run soon in the running event loop.

    asyncio's ``loop.call_soon`` or trio's ``run_sync_soon``: the callback runs
    after what the loop is doing now, without a task of its own.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    return loop.call_soon


def threadsafe_call_soon_factory() -> Callable[[Callable[[], object]], object]:
    """Like :func:`call_soon_factory`, but the function it returns may be called from any
    thread (asyncio's ``loop.call_soon_threadsafe``; trio's token, thread-safe already)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    return loop.call_soon_threadsafe


def clock_factory() -> Callable[[], float]:
    """The running event loop's clock, as :func:`anyio.current_time` reads it,
    without the backend lookup on each call (call it in the event loop)."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # trio
        import trio

        return trio.current_time


if sys.platform == "linux":

    class _FineEpollSelector(selectors.EpollSelector):
        """epoll, whose waits shorter than :data:`FINE_WAIT_S` end when due.

        ``epoll_wait`` counts whole milliseconds, and Python rounds a timeout up:
        a timer due in 4.2 ms fires after 5. Such a wait is a ``select()`` on the
        epoll descriptor instead (microseconds), then ``epoll_wait`` with no wait
        says what is ready; while the descriptor's number is too high for
        ``select()``, every wait is epoll's.
        """

        def __init__(self) -> None:
            super().__init__()
            self.fine = self.fileno() < _SELECT_FD_LIMIT

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is not None and 0 < timeout < FINE_WAIT_S and self.fine:
                if not select.select([self.fileno()], [], [], timeout)[0]:
                    return []
                timeout = 0
            return super().select(timeout)

    class FineTimerLoop(asyncio.SelectorEventLoop):
        """asyncio's event loop on :class:`_FineEpollSelector`: a timer due in less than
        :data:`FINE_WAIT_S` fires when due (plus the kernel's wake-up), not up to a
        millisecond late.

        Made in the thread it runs in, a thread of its own (a sync client's): it also
        sets that thread's timer slack to a nanosecond, from Linux's default 50 µs,
        which the kernel may add to every wait to wake threads together (measured with
        a sync producer's linger at 1,000 records/s: the pass 0.07 ms after the
        deadline at the median instead of 0.12-0.16).
        """

        def __init__(self) -> None:
            self._fine_selector = _FineEpollSelector()
            super().__init__(self._fine_selector)
            _least_timer_slack()

        @property
        def fires_when_due(self) -> bool:
            return self._fine_selector.fine

    def _least_timer_slack() -> None:
        """Set the calling thread's timer slack to 1 ns (0 would restore the default);
        nothing where libc's ``prctl`` cannot be called."""
        import ctypes  # here: most processes never make such a loop

        # OSError, AttributeError: no libc symbols to load (a static build)
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)


def fine_timer_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of a sync client's event loop (anyio's ``loop_factory`` option): on
    Linux a :class:`FineTimerLoop`; elsewhere None, for asyncio's default loop (macOS's
    kqueue times its waits to the nanosecond already)."""
    if sys.platform == "linux":
        return FineTimerLoop
    return None


def timers_fire_when_due() -> bool:
    """Whether the running event loop's short timers fire when due (a
    :class:`FineTimerLoop`), rather than on the next whole millisecond (call it in the
    event loop)."""
    if sys.platform != "linux":
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        return False
    return isinstance(loop, FineTimerLoop) and loop.fires_when_due
