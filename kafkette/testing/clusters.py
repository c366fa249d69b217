"""``memory://`` clusters made explicitly, with a config and a clock of the test's choosing."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkette.client.inprocess import MEMORY_SCHEME, close_cluster, get_cluster
from kafkette.server import BrokerConfig


def memory_cluster(
    name: str,
    *,
    clock: Callable[[], float] | None = None,
    properties: Mapping[str, str] | None = None,
    config: BrokerConfig | None = None,
) -> str:
    """Create the in-process cluster ``memory://NAME`` and return that bootstrap url.

    ``properties`` are Kafka broker properties (``group.min.session.timeout.ms``
    ...) over ``config``; ``clock`` (e.g. a
    :class:`~kafkette.testing.clock.ManualClock`) is the broker's time. A
    cluster of that name must not exist yet (close it with :func:`close_memory_cluster`).
    """
    url = MEMORY_SCHEME + name
    base = config if config is not None else BrokerConfig()
    if properties:
        base = BrokerConfig.from_properties(properties, base=base)
    cluster = get_cluster(url, base, clock)
    if cluster.broker.config is not base:
        raise ValueError(f"{url} exists already")
    return url


def close_memory_cluster(url: str) -> None:
    """Stop an in-process cluster made by :func:`memory_cluster` (its data is gone)."""
    close_cluster(url)
