"""``connections.max.reauth.ms`` for one listener and each SASL mechanism (KIP-368).

Kafka reads it as ``SaslChannelBuilder`` does, most specific first, from the
listener's configuration (``AbstractConfig.valuesWithPrefixOverride`` with the
listener's prefix): ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``,
then ``listener.name.<listener>.connections.max.reauth.ms``, then the broker-wide
``connections.max.reauth.ms`` (default 0: sessions do not expire). The listener
name and the mechanism are lower-cased in those names (``ListenerName.configPrefix``,
``ListenerName.saslMechanismPrefix``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

NAME = "connections.max.reauth.ms"
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_LISTENER_NAME = re.compile(r"^listener\.name\.[^.]+\.(?:[^.]+\.)?connections\.max\.reauth\.ms$")


class ReauthSettingError(ValueError):
    """A bad value of the property :attr:`name`; the message says why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name


def is_listener_reauth_property(name: str) -> bool:
    """Whether ``name`` is a per-listener (and maybe per-mechanism) form of the setting."""
    return _LISTENER_NAME.match(name) is not None


def parse_reauth_ms(value: str) -> int:
    """A value of the setting (Kafka's LONG, any sign; not positive means off); raises
    ValueError saying why not."""
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"must be an integer, got {value!r}") from None
    if not LONG_MIN <= number <= LONG_MAX:
        raise ValueError(f"must be a 64-bit integer, got {number}")
    return number


def _parse(name: str, value: str) -> int:
    try:
        return parse_reauth_ms(value)
    except ValueError as exc:
        raise ReauthSettingError(name, str(exc)) from None


def reauth_ms_by_mechanism(
    properties: Mapping[str, str], listener: str, mechanisms: Iterable[str], default: int
) -> dict[str, int]:
    """The setting for each of ``mechanisms`` on ``listener`` (``default``: the broker's).

    Raises :class:`ReauthSettingError` naming a bad value.
    """
    prefix = f"listener.name.{listener.lower()}."
    on_listener = properties.get(prefix + NAME)
    base = default if on_listener is None else _parse(prefix + NAME, on_listener)
    found = {}
    for mechanism in mechanisms:
        name = f"{prefix}{mechanism.lower()}.{NAME}"
        raw = properties.get(name)
        found[mechanism] = base if raw is None else _parse(name, raw)
    return found
