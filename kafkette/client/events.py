"""Events for hot loops, without anyio's backend lookup on each one.

``anyio.Event()`` finds the running backend on every call (through sniffio
and the current task), which costs about a microsecond: more than the event
itself. Code that makes an event per request or per loop turn gets the
backend's event class once, in the event loop, with :func:`event_factory`.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio


def event_factory() -> Callable[[], anyio.Event]:
    """A callable making events of the running backend (call it in the event loop)."""
    return type(anyio.Event())
