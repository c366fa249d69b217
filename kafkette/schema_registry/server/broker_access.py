"""How the registry of ``kafkette serve --schema-registry`` reaches the broker beside it.

The registry is a client of its broker, through one of the broker's own
listeners, chosen by :func:`choose_listener`:

- without an authorizer: PLAINTEXT, else SASL_PLAINTEXT, else SASL_SSL, else SSL
  (the least work per connection first);
- with an authorizer (ACLs on): SASL_PLAINTEXT, else SASL_SSL first, since there
  the registry authenticates as its own user, :data:`REGISTRY_USER`, which the
  broker makes a super user, so that its ``_schemas`` topic is always reachable
  whatever the ACLs; else PLAINTEXT or SSL, where the registry is
  ``User:ANONYMOUS`` (or its certificate's subject) and needs ACLs like any client.

On a SASL listener the registry's user has a random password made at start and
kept in this process only (:func:`registry_password`); it authenticates with PLAIN
if the listener enables it, else SCRAM. On a TLS listener (SSL, SASL_SSL) it
trusts exactly the broker's certificate (``ssl.certificate.location``, taken as
the one trust anchor: the registry connects to its own process on a loopback
address, whatever name the certificate gives), and on an SSL listener that asks
for client certificates it presents the broker's own certificate and key, as
Kafka's brokers do between themselves. No I/O here: the settings are handed to
the registry's clients.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Sequence
from typing import Any

import attrs

REGISTRY_USER = "__kafkette_schema_registry"
"""The SASL user the registry authenticates as (a reserved name; a super user)."""
REGISTRY_PRINCIPAL = f"User:{REGISTRY_USER}"

_ORDER_OPEN = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
_ORDER_WITH_ACLS = ("SASL_PLAINTEXT", "SASL_SSL", "PLAINTEXT", "SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")


@attrs.frozen
class Door:
    """A listener as the registry sees it."""

    protocol: str
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    host: str
    """Where to connect: a loopback address when the listener binds every address."""
    port: int
    mechanisms: tuple[str, ...] = ()
    """The SASL mechanisms it enables (SASL listeners)."""
    client_certificate: bool = False
    """Whether it asks TLS clients for a certificate (``ssl.client.auth`` requested or
    required)."""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


@attrs.frozen
class BrokerTls:
    """The broker's own TLS material (PEM file names)."""

    certificate_location: str | None
    key_location: str | None
    key_password: str | None = attrs.field(default=None, repr=False)


def choose_listener(doors: Sequence[Door], *, acls: bool) -> Door | None:
    """The listener the registry uses (None when there is none)."""
    order = _ORDER_WITH_ACLS if acls else _ORDER_OPEN
    for protocol in order:
        for door in doors:
            if door.protocol == protocol:
                return door
    return None


def registry_password() -> str:
    """A new random password for :data:`REGISTRY_USER` (never written anywhere)."""
    return secrets.token_urlsafe(32)


def client_context(tls: BrokerTls, *, present_certificate: bool) -> ssl.SSLContext:
    """A TLS client context trusting the broker's certificate alone (a ValueError
    naming the setting when it has none); with ``present_certificate``, the broker's
    certificate and key as the client's."""
    if tls.certificate_location is None:
        raise ValueError(
            "the schema registry reaches the broker on a TLS listener: it needs the "
            "broker's ssl.certificate.location"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=tls.certificate_location)
    # the broker's own certificate is the trust anchor, even if a CA issued it
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.check_hostname = False  # a loopback address, whatever name the certificate has
    if present_certificate:
        context.load_cert_chain(tls.certificate_location, tls.key_location, tls.key_password)
    return context


def client_settings(door: Door, tls: BrokerTls | None, password: str | None) -> dict[str, Any]:
    """The registry's client settings (Kafka's names) to reach the broker by ``door``;
    ``password``: :data:`REGISTRY_USER`'s, for a SASL listener."""
    settings: dict[str, Any] = {
        "bootstrap.servers": f"{door.host}:{door.port}",
        "security.protocol": door.protocol,
    }
    if door.sasl:
        if password is None:
            raise ValueError(f"a {door.protocol} listener needs the registry user's password")
        mechanism = next((m for m in _MECHANISMS if m in door.mechanisms), None)
        if mechanism is None:
            raise ValueError(f"the {door.protocol} listener enables no SASL mechanism")
        settings.update(
            {"sasl.mechanism": mechanism, "sasl.username": REGISTRY_USER, "sasl.password": password}
        )
    if door.tls:
        present = door.protocol == "SSL" and door.client_certificate
        settings["ssl.context"] = client_context(
            tls or BrokerTls(None, None), present_certificate=present
        )
    return settings
