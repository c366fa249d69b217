"""TLS on the broker's listeners: the server context and the certificate principal.

The context is built once at start from PEM files named with the settings
``ssl.certificate.location`` (the broker's certificate chain),
``ssl.key.location`` (its private key, encrypted with ``ssl.key.password`` if
given) and ``ssl.ca.location`` (the CAs client certificates are checked
against), with the standard library's :mod:`ssl`. ``ssl.client.auth`` is
Kafka's: ``required`` (a client without a certificate the CA vouches for is
refused in the handshake), ``requested`` (a client may present one; without it
the connection's principal is ``User:ANONYMOUS``; a certificate the CA does not
vouch for is refused in the handshake, as Java's SSLEngine does under
``setWantClientAuth``), ``none`` (the default).

Which value a listener takes is Kafka's since KIP-684 (``ChannelBuilders``):
``listener.name.<listener>.ssl.client.auth`` (the name lower-cased) when given;
else, for an SSL listener, the broker-wide ``ssl.client.auth``; a SASL_SSL
listener does not take the broker-wide value (its clients authenticate with
SASL) and asks for no certificate (:func:`client_auth_for`).

A client authenticated by its certificate is ``User:<subject>``, the subject's
distinguished name in RFC 2253 form as Java's ``X500Principal.getName()`` writes
it (Kafka's default principal builder): the most specific name first,
``CN=alice,OU=eng,O=example,C=FR``.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from kafkette.errors import ConfigError

ClientAuth = Literal["required", "requested", "none"]
CLIENT_AUTH_VALUES: tuple[ClientAuth, ...] = ("required", "requested", "none")

ANONYMOUS = "User:ANONYMOUS"

# Attribute names as ssl.getpeercert() spells them -> the keywords RFC 2253 (and
# Java's X500Principal) write; other attributes are written as an OID.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),  # IA5String
    "serialNumber": ("2.5.4.5", 0x13),  # PrintableString
    "surname": ("2.5.4.4", 0x0C),  # UTF8String
    "givenName": ("2.5.4.42", 0x0C),
    "title": ("2.5.4.12", 0x0C),
}


@attrs.frozen
class TlsSettings:
    """The ``ssl.*`` settings of the broker's TLS listeners (file names, not contents)."""

    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = attrs.field(default=None, repr=False)
    ca_location: str | None = None
    client_auth: ClientAuth = "none"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TlsSettings:
        """The settings from broker properties (raises :class:`ConfigError` naming one);
        ``client_auth`` is the broker-wide value, see :func:`client_auth_for`."""
        for name in properties:
            if is_listener_tls_property(name):
                _client_auth(properties, name)
        return cls(
            certificate_location=properties.get("ssl.certificate.location") or None,
            key_location=properties.get("ssl.key.location") or None,
            key_password=properties.get("ssl.key.password") or None,
            ca_location=properties.get("ssl.ca.location") or None,
            client_auth=_client_auth(properties, "ssl.client.auth"),
        )


def _client_auth(properties: Mapping[str, str], name: str) -> ClientAuth:
    value = properties.get(name, "none").strip().lower()
    for allowed in CLIENT_AUTH_VALUES:
        if value == allowed:
            return allowed
    raise ConfigError(name, f"must be one of {', '.join(CLIENT_AUTH_VALUES)}, got {value!r}")


_LISTENER_CLIENT_AUTH = re.compile(r"^listener\.name\.[^.]+\.ssl\.client\.auth$")


def is_listener_tls_property(name: str) -> bool:
    """Whether ``name`` is a listener's own ``ssl.client.auth``."""
    return _LISTENER_CLIENT_AUTH.match(name) is not None


def listener_client_auth_property(listener: str) -> str:
    """The name of a listener's own ``ssl.client.auth`` (``ListenerName.configPrefix``)."""
    return f"listener.name.{listener.lower()}.ssl.client.auth"


def client_auth_for(
    properties: Mapping[str, str], listener: str, protocol: str
) -> tuple[ClientAuth, bool]:
    """The ``ssl.client.auth`` of the TLS listener ``listener`` speaking ``protocol``
    (SSL or SASL_SSL), and whether a broker-wide value other than ``none`` was left out
    (a SASL_SSL listener without its own value, which Kafka logs as a warning)."""
    own = listener_client_auth_property(listener)
    if own in properties:
        return _client_auth(properties, own), False
    broker_wide = _client_auth(properties, "ssl.client.auth")
    if protocol == "SSL":
        return broker_wide, False
    return "none", broker_wide != "none"


PROPERTY_NAMES = frozenset(
    {
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.ca.location",
        "ssl.client.auth",
    }
)
"""The broker properties :class:`TlsSettings` reads (and each listener's own
``ssl.client.auth``: :func:`is_listener_tls_property`)."""


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The TLS context of the broker's SSL and SASL_SSL listeners.

    Raises :class:`ConfigError` naming the setting whose file is missing or bad.
    """
    if settings.certificate_location is None:
        raise ConfigError(
            "ssl.certificate.location", "a TLS listener needs the broker's certificate"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for setting, path in (
        ("ssl.certificate.location", settings.certificate_location),
        ("ssl.key.location", settings.key_location),
        ("ssl.ca.location", settings.ca_location),
    ):
        if path is not None and not os.path.isfile(path):
            raise ConfigError(setting, f"no such file: {path!r}")
    try:
        context.load_cert_chain(
            settings.certificate_location, settings.key_location, settings.key_password
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            "ssl.key.location" if settings.key_location else "ssl.certificate.location",
            f"cannot load the certificate {settings.certificate_location!r} with the key "
            f"{settings.key_location or settings.certificate_location!r}: {exc}",
        ) from None
    if settings.client_auth != "none":
        if settings.ca_location is None:
            raise ConfigError(
                "ssl.ca.location",
                f"ssl.client.auth={settings.client_auth} needs the CAs client certificates "
                "are checked against",
            )
        context.verify_mode = (
            ssl.CERT_REQUIRED if settings.client_auth == "required" else ssl.CERT_OPTIONAL
        )
    if settings.ca_location is not None:
        try:
            context.load_verify_locations(cafile=settings.ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "ssl.ca.location", f"cannot load {settings.ca_location!r}: {exc}"
            ) from None
    return context


def certificate_principal(peercert: Mapping[str, Any] | None) -> str:
    """``User:<subject DN>`` of a verified client certificate (``ssl.getpeercert()``),
    else ``User:ANONYMOUS``."""
    subject = (peercert or {}).get("subject")
    if not subject:
        return ANONYMOUS
    return "User:" + rfc2253(subject)


def rfc2253(subject: Any) -> str:
    """A distinguished name as ``ssl.getpeercert()`` gives it, in RFC 2253 form."""
    return ",".join(
        "+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject)
    )


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid, tag = _OIDS.get(name, (name, 0x0C))
    encoded = value.encode("utf-8")
    return f"{oid}=#{_der(tag, encoded).hex()}"


def _der(tag: int, content: bytes) -> bytes:
    size = len(content)
    if size < 0x80:
        return bytes([tag, size]) + content
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + content


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if (
            char in ',+"\\<>;'
            or (char == "#" and i == 0)
            or (char == " " and (i == 0 or i == len(value) - 1))
        ):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
