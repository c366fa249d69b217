"""The ``messaging.kafka.consumer.lag`` gauge: one per meter, read from every live consumer.

An SDK meter keeps the first observable gauge made under a name and ignores the callbacks
of later ones, so the consumers sharing a meter share one gauge whose callback asks each
of them (held weakly: a consumer that is gone is not asked).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from kafkette.otel import attributes as a

LagReader = Callable[[], Iterable[Observation]]


class LagGauge:
    """The gauge of one meter and the consumers it reads."""

    def __init__(self, meter: Meter) -> None:
        self._sources: weakref.WeakSet[Any] = weakref.WeakSet()
        meter.create_observable_gauge(
            a.CONSUMER_LAG,
            callbacks=[self.observe],
            unit="{message}",
            description="Records between a consumer's position and the end of an assigned "
            "partition (the last stable offset with read_committed), as of its last fetch.",
        )

    def add(self, source: Any) -> None:
        """Read ``source.lag_observations()`` at each collection from now on."""
        self._sources.add(source)

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        observations: list[Observation] = []
        for source in list(self._sources):
            observations.extend(source.lag_observations())
        return observations


_GAUGES: weakref.WeakKeyDictionary[Meter, LagGauge] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def watch(meter: Meter, source: Any) -> None:
    """Report ``source``'s lag through ``meter``'s gauge (made on first use)."""
    with _LOCK:
        gauge = _GAUGES.get(meter)
        if gauge is None:
            gauge = _GAUGES[meter] = LagGauge(meter)
        gauge.add(source)
