"""The authenticated principal of the connection a request arrived on.

Set in the connection's own context (each connection is a task of its own),
so every later request of that connection, and only of that one, reads it:
by the TLS connection (:mod:`kafkette.server.net.asyncio_connection`) from the
client's certificate, then by the frame layer
(:func:`kafkette.server.net.frames.authenticate_frame`) once SASL authentication
completes (on SASL_SSL the SASL principal wins, as in Kafka). None: the
connection did not authenticate (Kafka's ``User:ANONYMOUS``).
"""

from __future__ import annotations

import contextvars

connection_principal: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kafkette_connection_principal", default=None
)

__all__ = ["connection_principal"]
