"""The schema registry server: Confluent's REST API v1 over the ``_schemas`` topic.

The contract with the clients (``kafkette.schema_registry.client``, its in-process
``memory://`` transport) is one transport-agnostic entry point::

    registry = SchemaRegistry()                       # state in this object only
    async with open_registry("memory://NAME") as registry:   # or a broker's bootstrap
        status, body, content_type = await registry.handle(
            "POST", "/subjects/orders-value/versions", {}, b'{"schema": "..."}', {}
        )

:meth:`SchemaRegistry.handle` takes a request as Confluent's client sends it
(method, path without the query string, the query as a mapping, the raw body,
the headers) and returns a :class:`Response`, a named tuple ``(status, body,
content_type)``: the JSON body of Confluent's answer, or its error body
``{"error_code": 40401, "message": "Subject 'x' not found."}``, with the status
Confluent gives. It never raises for a bad request.

The layers (each a module; nothing here imports the client half):

- ``state.py``: the state, rebuilt from the ``_schemas`` records (Confluent's);
- ``api.py``: the REST API over the state, without I/O: an answer, or records
  to write and the answer once they are applied;
- ``registry.py``: :class:`SchemaRegistry`, the request entry point, doing the
  I/O around the API through a store (``LocalStore`` in this process);
- ``kafka_store.py``: the store in a broker's ``_schemas`` topic, through
  kafkette's own clients;
- ``http.py``: the HTTP/1.1 shell (h11 on anyio), HTTPS and Basic auth optional,
  serving a registry on a host and port;
- ``broker_access.py``: which of its broker's listeners ``kafkette serve``'s
  registry uses, and its client settings there (its own SASL user, the broker's
  certificate as the one it trusts).
"""

from kafkette.schema_registry.server.registry import Response, SchemaRegistry, open_registry

__all__ = ["Response", "SchemaRegistry", "open_registry"]
