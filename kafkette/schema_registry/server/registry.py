""":class:`SchemaRegistry`: one request in, one response out (Confluent's REST API v1).

A request is answered in two steps. :class:`~kafkette.schema_registry.server.api.Api`
(no I/O) reads the state and decides: an answer, or records to write and the
answer to give once they are applied. :class:`SchemaRegistry` does the I/O
around it through a :class:`Store`: before deciding a write it reads the store
to its end (as Confluent's KafkaStore does, so a second registry on the same
topic sees what the first wrote), then appends the records and reads them back
into the state. Writes are serialized by one lock. Reads read the store to its
end too, so a registry answers what another registry on the same topic wrote
before (one ListOffsets round trip). Confluent's error answers come from the
Api; a store that fails or times out is 500 with 50001 or 50002.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol
from urllib.parse import unquote

import anyio

from kafkette.schema_registry.server.api import (
    CONTENT_TYPE,
    Api,
    Record,
    Request,
    Response,
    RestError,
)
from kafkette.schema_registry.server.state import RegistryState, schema_record

__all__ = ["CONTENT_TYPE", "LocalStore", "Response", "SchemaRegistry", "Store", "open_registry"]

logger = logging.getLogger(__name__)


class Store(Protocol):
    """Where the records live: read to the end into the state, append and read back."""

    async def catch_up(self, state: RegistryState) -> None:
        """Apply every record written so far that the state has not seen."""

    async def append(self, state: RegistryState, records: Sequence[Record]) -> None:
        """Append ``records``, then apply everything up to and including them."""


class LocalStore:
    """Records in this process only: a registry without a broker (and for tests)."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._applied: dict[int, int] = {}

    async def catch_up(self, state: RegistryState) -> None:
        for key, value in self.records[self._applied.get(id(state), 0) :]:
            state.apply(key, value)
        self._applied[id(state)] = len(self.records)

    async def append(self, state: RegistryState, records: Sequence[Record]) -> None:
        self.records.extend(records)
        await self.catch_up(state)


_SEGMENT = re.compile(r"[^/]+")


class SchemaRegistry:
    """The registry: subjects, versions, ids, configs and modes, driven by requests."""

    def __init__(self, store: Store | None = None) -> None:
        self.store: Store = store if store is not None else LocalStore()
        self.state = RegistryState()
        self.api = Api(self.state)
        self._write_lock = anyio.Lock()

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
        parts = tuple(unquote(p) for p in _SEGMENT.findall(path))
        request = Request(method.upper(), parts, query, body)
        try:
            await self.store.catch_up(self.state)
            decision = self.api.decide(request)
            if isinstance(decision, Response):
                return decision
            async with self._write_lock:
                for _attempt in range(5):
                    await self.store.catch_up(self.state)
                    decision = self.api.decide(request)
                    if isinstance(decision, Response):
                        return decision
                    await self.store.append(self.state, decision.records)
                    expect = decision.expect
                    if expect is None:
                        return decision.answer
                    winner = self.state.version(expect.subject, expect.version)
                    if winner == expect:
                        return decision.answer
                    if winner is not None:
                        # another registry took this version first: its record again,
                        # after ours, so compaction (last record of a key) keeps it
                        await self.store.append(self.state, [schema_record(winner)])
                raise RestError(500, 50001, "Register operation failed: concurrent writers")
        except RestError as error:
            return error.response()
        except TimeoutError as error:
            return RestError(500, 50002, f"Operation timed out: {error}").response()
        except Exception as error:  # a store failure or a bug: an answer, not a dropped request
            logger.exception("schema registry: %s %s failed", method, path)
            return RestError(500, 50001, f"Error in the backend store: {error}").response()


@asynccontextmanager
async def open_registry(
    bootstrap_servers: str, client_config: Mapping[str, Any] | None = None
) -> AsyncIterator[SchemaRegistry]:
    """A registry whose state lives in the ``_schemas`` topic of ``bootstrap_servers``
    (``memory://NAME`` for the in-process fake), closed on exit; ``client_config``: more
    settings of its clients (``security.protocol``, SASL credentials, ``ssl.context``)."""
    from kafkette.schema_registry.server.kafka_store import KafkaStore

    async with KafkaStore.open(bootstrap_servers, client_config=client_config) as store:
        registry = SchemaRegistry(store)
        await store.catch_up(registry.state)
        yield registry
