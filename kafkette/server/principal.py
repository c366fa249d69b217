"""The authenticated principal of the connection a request arrived on.

Set by the frame layer (:func:`kafkette.server.frames.authenticate_frame`) in
the connection's own context once SASL authentication completes, so every
later request of that connection, and only of that one, reads it. None: the
connection did not authenticate (Kafka's ``User:ANONYMOUS``).
"""

from __future__ import annotations

import contextvars

connection_principal: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kafkette_connection_principal", default=None
)

__all__ = ["connection_principal"]
