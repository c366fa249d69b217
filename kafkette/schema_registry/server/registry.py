""":class:`SchemaRegistry`: one request in, one response out (Confluent's REST API v1).

Stub: every request is answered 501 until the core lands; the signature is the
contract the client half builds its in-process transport on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import NamedTuple

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
"""The content type of every answer, as Confluent's registry sends it."""


class Response(NamedTuple):
    """An answer: the HTTP status, the JSON body and its content type."""

    status: int
    body: bytes
    content_type: str


class SchemaRegistry:
    """The registry: subjects, versions, ids, configs and modes, driven by requests."""

    async def handle(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: bytes,
        headers: Mapping[str, str],
    ) -> Response:
        """Answer one request of Confluent's REST API v1; never raises for bad input.

        ``path`` is the URL path without the query string (percent-encoded as
        sent); ``query`` the decoded query parameters; ``headers`` lower-case names.
        """
        message = {"error_code": 50101, "message": "Not implemented yet"}
        return Response(501, json.dumps(message).encode(), CONTENT_TYPE)


@asynccontextmanager
async def open_registry(bootstrap_servers: str) -> AsyncIterator[SchemaRegistry]:
    """A registry whose state lives in the ``_schemas`` topic of ``bootstrap_servers``
    (``memory://NAME`` for the in-process fake), closed on exit."""
    yield SchemaRegistry()
