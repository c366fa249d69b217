"""The broker's listeners, as Kafka names them: ``NAME://HOST:PORT`` with a security protocol.

``listeners`` (or ``kafkette serve --listener``, repeatable) lists them;
``listener.security.protocol.map`` gives each name its protocol (Kafka's
default map names PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL after
themselves); ``advertised.listeners`` tells clients of each listener where to
connect, and a client is answered with the address of the listener it came in
on (:data:`advertised_address`), as Kafka does. An empty host listens on every
interface.

Parsing only; :mod:`kafkette.cli.serve` opens the sockets.
"""

from __future__ import annotations

import contextvars
import ipaddress
from collections.abc import Mapping
from typing import Literal

import attrs

from kafkette.errors import ConfigError

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SECURITY_PROTOCOLS: tuple[SecurityProtocol, ...] = (
    "PLAINTEXT",
    "SSL",
    "SASL_PLAINTEXT",
    "SASL_SSL",
)
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

advertised_address: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "kafkette_advertised_address", default=None
)
"""The advertised address of the listener the current request came in on (None: the
broker's own); set by each listening task, copied by its connection tasks."""


@attrs.frozen
class Listener:
    """One listener: its name, where it listens, its protocol and what it advertises."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised: tuple[str, int] | None = None
    explicit: bool = True
    """Named in the listener configuration (False: made from ``--listen``)."""

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a host name: it may resolve to anything
            return False


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_endpoint(text: str, where: str) -> tuple[str, str, int]:
    """``NAME://HOST:PORT`` -> (NAME, HOST, PORT); an empty host is every interface."""
    name, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not name or not colon or not port.isdigit() or int(port) > 65535:
        raise ConfigError(where, f"expected NAME://HOST:PORT, got {text!r}")
    if any(c in host for c in ",/ "):
        raise ConfigError(where, f"expected NAME://HOST:PORT, got {text!r}")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(where, f"bad listener name {name!r}")
    host = host.strip("[]") or "0.0.0.0"
    return name.upper(), host, int(port)


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``."""
    where = "listener.security.protocol.map"
    mapping: dict[str, SecurityProtocol] = {}
    for item in _split(text):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise ConfigError(where, f"expected NAME:PROTOCOL, got {item!r}")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                where,
                f"{protocol!r} is not a security protocol ({', '.join(SECURITY_PROTOCOLS)})",
            )
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(
    endpoints: list[str],
    advertised: list[str],
    protocol_map: str | None,
    where: str = "listeners",
) -> list[Listener]:
    """Listeners from ``NAME://HOST:PORT`` texts, their advertised addresses and the map.

    Raises :class:`ConfigError` naming the setting for a malformed endpoint, a name
    given twice, a name without a protocol, or an advertised name that is no listener.
    """
    mapping = parse_protocol_map(protocol_map if protocol_map is not None else DEFAULT_PROTOCOL_MAP)
    parsed: dict[str, tuple[str, int]] = {}
    for text in endpoints:
        name, host, port = parse_endpoint(text, where)
        if name in parsed:
            raise ConfigError(where, f"listener {name} is given twice")
        if port and any(p == port for _, p in parsed.values()):
            raise ConfigError(where, f"two listeners on port {port}")
        parsed[name] = (host, port)
    if not parsed:
        raise ConfigError(where, "expected at least one NAME://HOST:PORT")
    told: dict[str, tuple[str, int]] = {}
    for text in advertised:
        name, host, port = parse_endpoint(text, "advertised.listeners")
        if name not in parsed:
            raise ConfigError("advertised.listeners", f"{name} is not one of the listeners")
        if host == "0.0.0.0" or port == 0:
            raise ConfigError("advertised.listeners", f"{text!r} is not an address to connect to")
        told[name] = (host, port)
    listeners = []
    for name, (host, port) in parsed.items():
        protocol = mapping.get(name)
        if protocol is None:
            raise ConfigError(
                "listener.security.protocol.map", f"no security protocol for listener {name}"
            )
        listeners.append(Listener(name, host, port, protocol, told.get(name)))
    return listeners


PROPERTY_NAMES = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
"""The broker properties this module reads."""


def listeners_from_properties(
    properties: Mapping[str, str], extra: list[str]
) -> list[Listener] | None:
    """The listeners of ``listeners`` plus ``extra`` (``--listener``), else None."""
    # --listener takes what the listeners property takes: one listener or a list.
    endpoints = _split(properties.get("listeners", "")) + [e for x in extra for e in _split(x)]
    if not endpoints:
        for name in ("advertised.listeners", "listener.security.protocol.map"):
            if name in properties:
                raise ConfigError(name, "needs listeners (or --listener)")
        return None
    return parse_listeners(
        endpoints,
        _split(properties.get("advertised.listeners", "")),
        properties.get("listener.security.protocol.map"),
        "--listener" if extra and "listeners" not in properties else "listeners",
    )
