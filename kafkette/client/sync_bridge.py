"""Running the async client core behind a synchronous API.

Each sync client (``Producer``, ``Consumer``, ``AdminClient``) owns one
:class:`BackgroundLoop`: an anyio event loop in a daemon thread, reached
through a blocking portal. Calls that need the network cross into it with
:meth:`BackgroundLoop.call`; hot paths do not (``Producer.send`` appends to a
thread-safe accumulator, ``Consumer.poll`` drains fetched batches), so only
whole batches and control operations cross threads.

A sync method that does what its async twin does is documented once, on the
twin (:func:`documented_as`).
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextlib
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal

from kafkette.client.events import fine_timer_loop
from kafkette.errors import KafkaTimeoutError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


async def run_plain(func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` as a coroutine: how a sync client runs plain code on its loop's
    thread (:meth:`BackgroundLoop.call` takes coroutine functions)."""
    return func(*args)


async def task_host(*, task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup]) -> None:
    """A task group on the loop for a sync client's tasks that outlive one call: started
    with ``portal.start_task``, it hands out the group and runs until cancelled."""
    async with anyio.create_task_group() as task_group:
        task_status.started(task_group)
        await anyio.sleep_forever()


def documented_as(twin: Callable[..., Any]) -> Callable[[F], F]:
    """Give a sync client's method the docstring of its async twin, where the two say the
    same (``tests/test_sync_async_parity.py`` keeps their parameters alike)."""

    def document(method: F) -> F:
        method.__doc__ = twin.__doc__
        return method

    return document


class _Call(Generic[T]):
    """One :meth:`BackgroundLoop.call` under asyncio: the caller waits on ``lock`` (held
    from the start), which the loop releases once the task is done or could not start."""

    __slots__ = ("error", "lock", "task")

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.lock.acquire()
        self.task: asyncio.Task[T] | None = None
        self.error: BaseException | None = None

    def start(self, func: Callable[..., Awaitable[T]], args: tuple[Any, ...]) -> None:
        """In the loop's thread: run ``func(*args)`` as a task, in the caller's context
        (copied, as the portal does), which names asyncio as the running library: a
        caller inside trio (an async test using a sync client) must not make anyio in the
        task think it runs on trio."""
        sniffio = sys.modules.get("sniffio")
        if sniffio is not None:  # (only once loaded, by trio say, can it name another library)
            sniffio.current_async_library_cvar.set("asyncio")
        try:
            self.task = asyncio.ensure_future(func(*args))
        except BaseException as exc:  # func raised before its first await, or is no coroutine
            self.fail(exc)
            return
        self.task.add_done_callback(self.finish)

    def finish(self, task: asyncio.Task[T]) -> None:
        self.lock.release()

    def fail(self, error: BaseException) -> None:
        """Release the caller with ``error`` (the call never ran)."""
        self.error = error
        self.lock.release()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        task = self.task
        assert task is not None
        if task.cancelled():  # the loop stopped under it, as the portal reports it
            raise concurrent.futures.CancelledError()
        return task.result()


class BackgroundLoop:
    """One event loop in a daemon thread, for one sync client."""

    def __init__(self, name: str, backend: str = "asyncio") -> None:
        """``name`` names the thread and the errors ("kafkette producer")."""
        self.name = name
        self._closed = False
        self._lock = threading.Lock()
        self._calls: set[_Call[Any]] = set()
        """Calls handed to the loop and not done (asyncio): failed if the loop ends first."""
        self._ended = False
        started = threading.Event()
        portal: list[BlockingPortal] = []
        soon: list[Callable[[Callable[[], object]], object]] = []
        failure: list[BaseException] = []

        async def serve() -> None:
            async with BlockingPortal() as running:
                portal.append(running)
                soon.append(_call_soon_threadsafe(backend))
                started.set()
                await running.sleep_until_stopped()

        # asyncio's loop with timers that fire when due (a producer's linger): the
        # thread is the client's own, so the loop is ours to choose
        factory = fine_timer_loop() if backend == "asyncio" else None
        options = {"loop_factory": factory} if factory is not None else None

        def run() -> None:
            try:
                anyio.run(serve, backend=backend, backend_options=options)
            except BaseException as exc:  # surfaced to the constructor if it never started
                failure.append(exc)
                started.set()
            finally:
                self._end_calls()

        # A daemon thread (not anyio's start_blocking_portal, whose executor thread the
        # interpreter joins at exit): a client or in-process cluster nobody closed must
        # not keep the process from exiting.
        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        started.wait()
        if not portal:
            raise RuntimeError(f"{name}: event loop failed to start") from (
                failure[0] if failure else None
            )
        self.portal = portal[0]
        self._call_soon = soon[0]
        self._asyncio = backend == "asyncio"

    def call(
        self, func: Callable[..., Awaitable[T]], *args: Any, timeout_s: float | None = None
    ) -> T:
        """Run ``func(*args)`` in the loop and wait for its result.

        With ``timeout_s`` the call is cancelled in the loop after that long
        and :class:`KafkaTimeoutError` is raised here.
        """
        if self._closed:
            raise RuntimeError(f"{self.name} is closed")
        run = self._run if self._asyncio else self.portal.call
        if timeout_s is None:
            return run(func, *args)

        async def bounded() -> T:
            with anyio.fail_after(timeout_s):
                return await func(*args)

        try:
            return run(bounded)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"{self.name}: operation did not finish within {timeout_s}s"
            ) from None

    def _run(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``portal.call`` for asyncio, with one crossing each way: the loop's thread-safe
        callback starts the task and the task's end releases a lock the caller waits on.
        (The portal first waits for the loop to create its task, then for the result: two
        round trips between the threads, which made a sync commit cost 150-220 µs of CPU
        instead of 100-130.) An interrupted wait (Ctrl-C) cancels the task."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}: cannot wait for the event loop in its own thread")
        call: _Call[T] = _Call()
        with self._lock:
            if self._ended:
                raise RuntimeError(f"{self.name} is closed")
            self._calls.add(call)
        try:
            try:
                self._call_soon(lambda: call.start(func, args))
            except RuntimeError:  # the loop closed meanwhile
                raise RuntimeError(f"{self.name} is closed") from None
            call.lock.acquire()
        except BaseException:  # (the cancel runs after the start: callbacks keep their order)
            with contextlib.suppress(RuntimeError):
                self._call_soon(lambda: call.task is not None and call.task.cancel())
            raise
        finally:
            self._forget(call)
        return call.outcome()

    def _forget(self, call: _Call[Any]) -> None:
        with self._lock:
            self._calls.discard(call)

    def _end_calls(self) -> None:
        """The loop has ended: calls whose callback it never ran fail (they would wait
        forever); those it ran were released when their tasks ended."""
        with self._lock:
            self._ended = True
            calls, self._calls = self._calls, set()
        for call in calls:
            if call.task is None and call.error is None:
                call.fail(RuntimeError(f"{self.name} is closed"))

    def call_soon(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start ``func(*args)`` in the loop without waiting for it."""
        if not self._closed:
            self.portal.start_task_soon(func, *args)

    def wake(self, func: Callable[[], None]) -> None:
        """Run a plain function in the loop thread (e.g. set an event); returns at once.

        The loop's own thread-safe callback queue, not a task through the portal: the
        consumer's ``poll`` wakes its fetcher this way once per used-up fetch, and a
        portal task (a future, a task, a cancel scope) cost several times more.
        """
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile (closing)
                self._call_soon(func)

    @property
    def in_loop_thread(self) -> bool:
        """Whether the caller is the loop's own thread (where blocking calls would deadlock).

        Another event loop's thread is not: a sync client used from async code
        (a web handler, an async test) blocks that loop, but does not deadlock.
        """
        return threading.current_thread() is self._thread

    def close(self) -> None:
        """Cancel what still runs in the loop, stop it and join its thread; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Background tasks (fetchers, maintenance) run until cancelled: cancel them,
        # or stopping the portal would wait for them forever. RuntimeError: already stopped.
        with contextlib.suppress(RuntimeError):
            self.portal.call(self.portal.stop, True)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _call_soon_threadsafe(backend: str) -> Callable[[Callable[[], object]], object]:
    """The running loop's way to schedule a plain callback from another thread."""
    if backend == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    return asyncio.get_running_loop().call_soon_threadsafe
