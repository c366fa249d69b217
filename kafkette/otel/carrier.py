"""Record headers as a propagation carrier: ``traceparent`` and ``tracestate`` in, out.

The producer's headers are ``(str, bytes | None)`` pairs; a consumer record's headers a
tuple of such pairs. Values are the propagator's text encoded as UTF-8, as the contrib
instrumentations of confluent-kafka, aiokafka and kafka-python write and read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.propagators.textmap import Getter, Setter

HeaderPairs = Sequence[tuple[str, Any]]
"""Header pairs: a value is bytes (a consumer record's), or str or bytes (a producer's)."""


class HeaderSetter(Setter[list[tuple[str, "bytes | None"]]]):
    """Writes a field as a header, replacing one of the same name."""

    def set(self, carrier: list[tuple[str, bytes | None]], key: str, value: str) -> None:
        carrier[:] = [pair for pair in carrier if pair[0] != key]
        carrier.append((key, value.encode()))


class HeaderGetter(Getter[HeaderPairs]):
    """Reads a field from the headers (the last header of that name, as Kafka's
    ``Headers.lastHeader``); a header that is not UTF-8 is not there."""

    def get(self, carrier: HeaderPairs, key: str) -> list[str] | None:
        for name, value in reversed(carrier):
            if name == key and value is not None:
                if isinstance(value, str):
                    return [value]
                try:
                    return [bytes(value).decode()]
                except (TypeError, UnicodeDecodeError):
                    return None
        return None

    def keys(self, carrier: HeaderPairs) -> list[str]:
        return [name for name, _ in carrier]


SETTER = HeaderSetter()
GETTER = HeaderGetter()
