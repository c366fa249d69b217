"""Kafka's ``max.connections.per.ip``: how many connections one address may hold.

:class:`ConnectionQuotas` counts the open TCP connections per client address,
across every listener of the broker, as Kafka's ``ConnectionQuotas`` does. A
connection over the address's limit is closed as soon as it is accepted, before
a byte is read. The limit of an address is its entry in
``max.connections.per.ip.overrides`` (``HOST_OR_IP:N,...``), else
``max.connections.per.ip`` (Kafka's default: 2147483647, no limit); both are
read at each accept through ``limits``, so a dynamic change applies to the
next connection (existing ones stay open, as in Kafka).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

UNLIMITED = 2_147_483_647


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``HOST_OR_IP:N`` entries, comma-separated
    (ValueError naming the bad entry)."""
    overrides: dict[str, int] = {}
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, colon, count = entry.rpartition(":")
        try:
            limit = int(count)
        except ValueError:
            limit = -1
        if not colon or not host or limit < 0:
            raise ValueError(f"expected HOST_OR_IP:N, got {entry!r}")
        overrides[host] = limit
    return overrides


class ConnectionQuotas:
    """Open connections per address and the limits they are held to."""

    def __init__(self, limits: Callable[[], tuple[int, Mapping[str, int]]]) -> None:
        self._limits = limits
        self._open: Counter[str] = Counter()

    def limit(self, address: str) -> int:
        """How many connections ``address`` may hold."""
        default, overrides = self._limits()
        return overrides.get(address, default)

    def acquire(self, address: str) -> bool:
        """Count a new connection from ``address``; False (nothing counted) when the
        address already holds its limit."""
        if self._open[address] >= self.limit(address):
            return False
        self._open[address] += 1
        return True

    def release(self, address: str) -> None:
        """A connection from ``address`` closed."""
        self._open[address] -= 1
        if self._open[address] <= 0:
            del self._open[address]

    def open_connections(self, address: str) -> int:
        return self._open[address]
