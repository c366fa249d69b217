"""TLS for client connections: ``security.protocol=SSL`` and the ``ssl.*`` settings.

A user may hand over a ready ``ssl.SSLContext`` (``ssl_context``), or name a
CA bundle (``ssl.ca.location``), a client certificate and key for mutual TLS
(``ssl.certificate.location``, ``ssl.key.location``), and whether to check the
broker's host name (``ssl.endpoint.identification.algorithm``: ``https`` or
empty, as in Kafka). The context is built once per client, so a missing or
unreadable file is an error at construction, naming the setting.
"""

from __future__ import annotations

import os
import ssl

from kafkette.client.config import ClientConfig
from kafkette.errors import ConfigError


def ssl_context_for(config: ClientConfig) -> ssl.SSLContext | None:
    """The TLS context of a client's connections, or None for plaintext.

    A file named by ``ssl.ca.location``, ``ssl.certificate.location`` or
    ``ssl.key.location`` that cannot be read is a :class:`ConfigError` naming the
    setting, also when ``security.protocol`` uses no TLS (the likelier mistake is then
    the protocol: a plaintext client on a TLS listener only sees the connection closed).
    """
    tls = config.security_protocol in ("ssl", "sasl_ssl")
    _check_files(config, tls)
    if not tls:
        return None
    if config.ssl_context is not None:
        if not isinstance(config.ssl_context, ssl.SSLContext):
            raise ConfigError("ssl.context", "must be an ssl.SSLContext")
        return config.ssl_context
    try:
        context = ssl.create_default_context(cafile=config.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.ca.location", f"cannot load {config.ssl_cafile!r}: {exc}") from None
    if config.ssl_keyfile is not None and config.ssl_certfile is None:
        raise ConfigError("ssl.key.location", "needs ssl.certificate.location (its certificate)")
    if config.ssl_certfile is not None:
        try:
            context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                "ssl.certificate.location", f"cannot load {config.ssl_certfile!r}: {exc}"
            ) from None
    if not config.ssl_check_hostname:
        context.check_hostname = False
    return context


def _check_files(config: ClientConfig, tls: bool) -> None:
    for name, path in (
        ("ssl.ca.location", config.ssl_cafile),
        ("ssl.certificate.location", config.ssl_certfile),
        ("ssl.key.location", config.ssl_keyfile),
    ):
        if path is None or os.access(path, os.R_OK):
            continue
        why = "no such file" if not os.path.exists(path) else "not readable"
        if not tls:
            protocol = config.security_protocol.upper()
            why += f" (and security.protocol is {protocol}, without TLS: is SSL meant?)"
        raise ConfigError(name, f"cannot load {path!r}: {why}")
