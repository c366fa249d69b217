"""Events for hot loops, without anyio's backend lookup on each one.

``anyio.Event()`` finds the running backend on every call (through sniffio
and the current task), which costs about a microsecond: more than the event
itself. Code that makes an event per request or per loop turn gets the
backend's event class once, in the event loop, with :func:`event_factory`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio


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
