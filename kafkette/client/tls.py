"""TLS for client connections: ``security.protocol=SSL`` and the ``ssl.*`` settings.

A user may hand over a ready ``ssl.SSLContext`` (``ssl_context``), or name a
CA bundle (``ssl.ca.location``), a client certificate and key for mutual TLS
(``ssl.certificate.location``, ``ssl.key.location``), and whether to check the
broker's host name (``ssl.endpoint.identification.algorithm``: ``https`` or
empty, as in Kafka). The context is built once per client, so a missing or
unreadable file is an error at construction, naming the setting.
"""

from __future__ import annotations

import ssl

from kafkette.client.config import ClientConfig
from kafkette.errors import ConfigError


def ssl_context_for(config: ClientConfig) -> ssl.SSLContext | None:
    """The TLS context of a client's connections, or None for plaintext."""
    if config.security_protocol not in ("ssl", "sasl_ssl"):
        return None
    if config.ssl_context is not None:
        if not isinstance(config.ssl_context, ssl.SSLContext):
            raise ConfigError("ssl.context", "must be an ssl.SSLContext")
        return config.ssl_context
    try:
        context = ssl.create_default_context(cafile=config.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl.ca.location", f"cannot load {config.ssl_cafile!r}: {exc}") from None
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
