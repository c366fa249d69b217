"""Assignors by name: turns ``partition.assignment.strategy`` into assignor objects."""

from __future__ import annotations

from collections.abc import Iterable

from kafkette.consumer.assignors.base import Assignor
from kafkette.consumer.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafkette.consumer.assignors.range import RangeAssignor
from kafkette.consumer.assignors.roundrobin import RoundRobinAssignor
from kafkette.consumer.assignors.sticky import StickyAssignor
from kafkette.errors import ConfigError

SETTING = "partition.assignment.strategy"

ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}
"""The built-in assignors by protocol name."""

_JAVA_PACKAGE = "org.apache.kafka.clients.consumer."
_JAVA_NAMES: dict[str, str] = {
    _JAVA_PACKAGE + "RangeAssignor": "range",
    _JAVA_PACKAGE + "RoundRobinAssignor": "roundrobin",
    _JAVA_PACKAGE + "StickyAssignor": "sticky",
    _JAVA_PACKAGE + "CooperativeStickyAssignor": "cooperative-sticky",
}


def resolve_assignors(
    strategies: Iterable[str | Assignor | type[Assignor]] | str,
) -> list[Assignor]:
    """Assignor objects for a strategy list, in preference order.

    Each entry is a protocol name (``"range"``, ``"roundrobin"``, ``"sticky"``,
    ``"cooperative-sticky"``), a Java class name
    (``"org.apache.kafka.clients.consumer.RangeAssignor"``), an assignor
    instance, or an :class:`Assignor` subclass (built with no arguments). A
    plain string is read as Kafka's comma-separated list. Raises
    :class:`~kafkette.errors.ConfigError` on an unknown name, an empty list or
    two assignors with the same name.
    """
    if isinstance(strategies, str):
        strategies = [s for s in (part.strip() for part in strategies.split(",")) if s]
    resolved = [_resolve_one(entry) for entry in strategies]
    if not resolved:
        raise ConfigError(SETTING, "at least one assignor is needed")
    names = [a.name for a in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(SETTING, f"assignor named more than once: {', '.join(duplicates)}")
    return resolved


def _resolve_one(entry: str | Assignor | type[Assignor]) -> Assignor:
    if isinstance(entry, Assignor):
        return entry
    if isinstance(entry, type):
        if issubclass(entry, Assignor):
            return entry()
        raise ConfigError(SETTING, f"{entry.__qualname__} is not an Assignor subclass")
    if isinstance(entry, str):
        name = _JAVA_NAMES.get(entry.strip(), entry.strip())
        cls = ASSIGNORS.get(name)
        if cls is None:
            known = ", ".join(sorted(ASSIGNORS))
            raise ConfigError(SETTING, f"unknown assignor {entry!r} (known: {known})")
        return cls()
    raise ConfigError(SETTING, f"not an assignor or assignor name: {entry!r}")
