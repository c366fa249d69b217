"""The background loop behind sync clients."""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import time

import anyio
import pytest

from kafkette.client.events import timers_fire_when_due
from kafkette.client.sync_bridge import BackgroundLoop, run_plain
from kafkette.errors import KafkaTimeoutError


def test_call_runs_in_another_thread_and_returns() -> None:
    loop = BackgroundLoop("test")
    try:

        async def where() -> int:
            await anyio.sleep(0)
            return threading.get_ident()

        assert loop.call(where) != threading.get_ident()
    finally:
        loop.close()


def test_call_timeout_cancels_in_the_loop() -> None:
    loop = BackgroundLoop("test")
    cancelled = threading.Event()
    try:

        async def forever() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()

        with pytest.raises(KafkaTimeoutError, match="test"):
            loop.call(forever, timeout_s=0.05)
        assert cancelled.is_set()
    finally:
        loop.close()


def test_exceptions_cross_back() -> None:
    loop = BackgroundLoop("test")
    try:

        async def boom() -> None:
            raise ValueError("from the loop")

        with pytest.raises(ValueError, match="from the loop"):
            loop.call(boom)
    finally:
        loop.close()


def test_wake_and_close_are_idempotent() -> None:
    loop = BackgroundLoop("test")
    seen = threading.Event()
    loop.wake(seen.set)
    assert seen.wait(5)
    loop.close()
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.call(anyio.sleep, 0)


def seen_in_thread(seen: list[tuple[int, int]], i: int) -> None:
    seen.append((i, threading.get_ident()))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_wake_runs_in_the_loop_thread_in_order(backend: str) -> None:
    """wake() hands plain functions to the loop's thread, in the order given."""
    loop = BackgroundLoop("test", backend=backend)
    seen: list[tuple[int, int]] = []
    done = threading.Event()
    try:
        for i in range(5):
            loop.wake(functools.partial(seen_in_thread, seen, i))
        loop.wake(done.set)
        assert done.wait(5)
        assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
        assert {ident for _, ident in seen} == {loop._thread.ident}
    finally:
        loop.close()
    loop.wake(done.clear)  # closed: nothing runs, nothing raises
    assert done.is_set()


def test_close_cancels_background_tasks() -> None:
    """A task started with call_soon that never ends does not keep close() waiting."""
    loop = BackgroundLoop("test")
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    loop.call_soon(forever)
    loop.call(anyio.sleep, 0.01)
    loop.close()
    assert cancelled.is_set()


def test_an_unclosed_loop_does_not_keep_the_interpreter_alive() -> None:
    """An in-process cluster (or a client) nobody closed must not hang process exit."""
    import subprocess
    import sys

    code = (
        "from kafkette.client.sync_bridge import BackgroundLoop\n"
        "import anyio\n"
        "loop = BackgroundLoop('left open')\n"
        "loop.call_soon(anyio.sleep_forever)\n"
        "print('bye')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "bye"


def test_in_loop_thread_is_the_loops_own_thread_only() -> None:
    """In the loop's thread it is True; in the caller's, even inside another event loop, False."""
    loop = BackgroundLoop("test")
    try:

        async def inside() -> bool:
            return loop.in_loop_thread

        async def elsewhere() -> bool:
            return loop.in_loop_thread

        assert loop.call(inside) is True
        assert loop.in_loop_thread is False
        assert anyio.run(elsewhere) is False
    finally:
        loop.close()


def test_an_asyncio_loop_times_short_waits_to_the_microsecond() -> None:
    """On Linux a sync client's asyncio loop is a FineTimerLoop (a producer's linger fires
    when due, not on epoll's next whole millisecond); elsewhere asyncio's own (kqueue's
    waits are not rounded); a trio loop is trio's own."""
    linux = sys.platform == "linux"
    asyncio_loop = BackgroundLoop("test")
    trio_loop = BackgroundLoop("test", backend="trio")
    try:
        assert asyncio_loop.call(run_plain, timers_fire_when_due) is linux
        assert trio_loop.call(run_plain, timers_fire_when_due) is False
        if linux:  # and the loop's thread waits without Linux's 50 µs of timer slack
            assert asyncio_loop.call(run_plain, timer_slack_ns) == 1
    finally:
        asyncio_loop.close()
        trio_loop.close()


def timer_slack_ns() -> int:
    """The calling thread's timer slack (prctl PR_GET_TIMERSLACK)."""
    return int(ctypes.CDLL(None).prctl(30, 0, 0, 0, 0))


def test_a_call_from_the_loops_own_thread_raises_instead_of_waiting_forever() -> None:
    loop = BackgroundLoop("test")
    try:

        async def nested() -> None:
            loop.call(anyio.sleep, 0)

        with pytest.raises(RuntimeError, match="its own thread"):
            loop.call(nested)
        assert loop.call(run_plain, lambda: 7) == 7  # the loop is still fine
    finally:
        loop.close()


def test_a_call_the_loop_never_started_fails_when_the_loop_ends() -> None:
    """A call handed over as the loop ends (its callback never runs) is released with
    "closed", not left waiting."""
    loop = BackgroundLoop("test")
    loop._call_soon = lambda callback: None  # handed over, never run
    outcome: list[BaseException] = []

    def caller() -> None:
        try:
            loop.call(anyio.sleep, 0)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=caller)
    thread.start()
    deadline = time.monotonic() + 5
    while not loop._calls and time.monotonic() < deadline:
        time.sleep(0.001)
    assert loop._calls  # the caller waits
    loop.close()
    thread.join(5)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "closed" in str(outcome[0])


def test_an_interrupted_call_cancels_its_task_in_the_loop() -> None:
    """Ctrl-C while a sync call waits raises KeyboardInterrupt in the caller and cancels
    the call's task in the loop (in a child process: the signal goes to its main thread)."""
    import subprocess

    code = (
        "import signal, threading, anyio\n"
        "from kafkette.client.sync_bridge import BackgroundLoop\n"
        "loop = BackgroundLoop('test')\n"
        "started, cancelled = threading.Event(), threading.Event()\n"
        "async def forever():\n"
        "    started.set()\n"
        "    try:\n"
        "        await anyio.sleep_forever()\n"
        "    finally:\n"
        "        cancelled.set()\n"
        "def interrupt():\n"
        "    started.wait(10)\n"
        "    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)\n"
        "threading.Thread(target=interrupt).start()\n"
        "try:\n"
        "    loop.call(forever)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', cancelled.wait(10))\n"
        "loop.close()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "interrupted True"
