"""A sync producer's linger alarm: the sending thread sets a timer for the end of a new
batch's linger instead of waking the producer's loop thread at once (#30).

A batch opened by ``send`` in the caller's thread used to wake the loop thread straight
away (a thread-safe callback, :meth:`Sender.nudge <kafkette.producer.sender.Sender.nudge>`)
for a pass that only found the batch not ready yet and armed a timer for its linger's end:
one wake-up of that thread, its self-pipe's reads and one pass per batch, for nothing
sent. With the alarm, the caller's thread sets a Linux ``timerfd`` to that end
(``timerfd_settime``, one system call, waking no thread), the loop's ``epoll`` watches it,
and the loop thread wakes once, when the batch is due, for the pass that sends it. A batch
that fills up, a flush or a close still wakes the loop thread at once (and disarm the
alarm: that pass looks at every batch).

Only while the sender holds nothing back and runs no transaction
(:attr:`Sender.may_defer_news <kafkette.producer.sender.Sender.may_defer_news>`): else
the pass a new batch starts may have work to do before the linger ends (a producer id to
get, a partition to add to the transaction). Elsewhere than on Linux, or without libc's
``timerfd_create``, there is no alarm and every new batch wakes the loop thread, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import sys
from collections.abc import Callable

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


def _timerfd_calls() -> tuple[Callable[[int, int], int], Callable[..., int]] | None:
    """libc's ``timerfd_create`` and ``timerfd_settime`` (the latter called without
    releasing the interpreter lock: it takes about a microsecond), or None."""
    if sys.platform != "linux":
        return None
    try:
        create = ctypes.CDLL(None, use_errno=True).timerfd_create
        settime = ctypes.PyDLL(None, use_errno=True).timerfd_settime
    except (OSError, AttributeError):  # no libc symbols to load (a static build)
        return None
    create.argtypes = (ctypes.c_int, ctypes.c_int)
    create.restype = ctypes.c_int
    settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    settime.restype = ctypes.c_int
    return create, settime


class LingerAlarm:
    """A ``timerfd`` in the sync producer's event loop that runs ``fire`` when due.

    :meth:`at` and :meth:`cancel` may be called from any thread; :meth:`at` under the
    accumulator's lock (the one place that arms it, so two sending threads arm it in
    turn). :meth:`open` in the loop's thread, :meth:`close` after the loop has stopped.
    """

    def __init__(
        self,
        fd: int,
        settime: Callable[..., int],
        loop: asyncio.AbstractEventLoop,
        fire: Callable[[], object],
        allowed: Callable[[], bool],
    ) -> None:
        self._fd = fd
        self._settime = settime
        self._fire = fire
        self._allowed = allowed
        self._armed: float | None = None
        """The deadline (ms) the timer is set to, until the loop thread has read it."""
        self._spec = _Itimerspec()
        """The arming's argument (filled under the accumulator's lock)."""
        self._zero = ctypes.byref(_Itimerspec())
        """The disarming's argument (never changed: :meth:`cancel` takes no lock)."""
        loop.add_reader(fd, self._on_readable)

    @classmethod
    def open(cls, fire: Callable[[], object], allowed: Callable[[], bool]) -> LingerAlarm | None:
        """An alarm in the running event loop (call it there) that runs ``fire`` in it when
        due; :meth:`at` arms it only while ``allowed()``. None where there is no timerfd."""
        calls = _timerfd_calls()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # trio: no readers to add
            return None
        if calls is None:
            return None
        create, settime = calls
        fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            return None
        try:
            return cls(fd, settime, loop, fire, allowed)
        except BaseException:
            os.close(fd)
            raise

    def at(self, deadline_ms: float) -> bool:
        """Have ``fire`` run at ``deadline_ms`` (``time.monotonic`` in ms) or sooner; False
        when the alarm may not be used now (the caller then wakes the loop at once)."""
        if self._fd < 0 or not self._allowed():
            return False
        armed = self._armed
        if armed is not None and armed <= deadline_ms:
            return True
        self._armed = deadline_ms
        ns = max(int(deadline_ms * 1_000_000), 1)  # zero would disarm it
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(ns, 1_000_000_000)
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) == 0:
            return True
        self._armed = None  # not armed: the next batch must not count on it
        return False

    def cancel(self) -> None:
        """Disarm it: the loop thread is being woken to look at every batch now."""
        if self._armed is not None and self._fd >= 0:
            self._armed = None
            self._settime(self._fd, 0, self._zero, None)

    def _on_readable(self) -> None:
        # re-armed between its expiry and this read: nothing to read, the pass runs anyway
        with contextlib.suppress(BlockingIOError):
            os.read(self._fd, 8)
        # before the pass: a batch opened after this reads no deadline and arms it again,
        # and one opened before, finding the deadline set, is seen by the pass below
        self._armed = None
        self._fire()

    def close(self) -> None:
        """Close the timer (after the loop it was in has stopped)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
