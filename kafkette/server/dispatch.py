"""The broker's handler table and the request context: what a handler is given.

Each API is served by a coroutine registered with :func:`handler` (one module
per API or group of APIs in :mod:`kafkette.server.handlers`), together with
the versions this broker supports for it; ApiVersions answers from that
table, and :mod:`kafkette.server.net.frames` looks requests up in it.

This module is a leaf: the handlers and the broker both import it, and it
imports neither, so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from kafkette.acl import AclOperation, ResourceType
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.protocol.schema import Request, Response

if TYPE_CHECKING:
    from kafkette.server.acl.authorizer import AclAuthorizer
    from kafkette.server.broker import Broker

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a connection that did not authenticate (Kafka's)."""


class CloseConnection(Exception):
    """The connection must be closed (after one log line): raised by the frame
    layer on a malformed frame, and by a handler where Kafka drops the
    connection (a failed acks=0 produce)."""


@attrs.define(eq=False)
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    client_host: str = "127.0.0.1"
    listener: str = "PLAINTEXT"
    node_id: int | None = None
    """The node the request reached, when the broker core stands for several
    (:class:`~kafkette.server.nodes.NodeTable`); None for a lone broker."""
    principal: str = ANONYMOUS
    """Who sent it: ``User:NAME`` after SASL, the certificate's name after TLS
    with client certificates, else ``User:ANONYMOUS``."""
    authorizer: AclAuthorizer | None = None
    """The broker's authorizer, or None when every request is allowed."""
    large_answer: bool = False
    """Set by a handler whose answer is large however fast it was made (DescribeConfigs
    naming one broker thousands of times): the frame layer encodes it in a worker thread."""

    @property
    def host(self) -> str:
        """The client's address without its port, as ACL hosts name it."""
        peer = self.client_host
        if peer.startswith("[") and "]:" in peer:
            return peer[1 : peer.index("]:")]
        if peer.count(":") == 1:
            return peer.rpartition(":")[0]
        return peer

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the principal may perform ``operation`` on the resource
        (always, without an authorizer)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def authorized_operations(self, resource_type: ResourceType, name: str, supported: int) -> int:
        """The bit field (bit N: operation N) of the ``supported`` operations the
        principal may perform on the resource (all of them without an authorizer)."""
        if self.authorizer is None:
            return supported
        allowed = 0
        for operation in AclOperation:
            bit = 1 << operation
            if supported & bit and self.authorizer.authorize(
                self.principal, self.host, operation, resource_type, name
            ):
                allowed |= bit
        return allowed

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


Handler = Callable[["Broker", RequestContext, Any], Awaitable[Response | None]]
R = TypeVar("R", bound=Request)


@attrs.frozen
class HandlerEntry:
    """One API's handler and the versions the broker serves it at."""

    request: type[Request]
    min_version: int
    max_version: int
    func: Handler


HANDLERS: dict[int, HandlerEntry] = {}
"""Registered handlers by API key (filled when :mod:`kafkette.server.handlers` is imported)."""


def handler(
    request: type[R], *, min_version: int | None = None, max_version: int | None = None
) -> Callable[[Callable[[Broker, RequestContext, R], Awaitable[Response | None]]], Handler]:
    """Register the decorated coroutine as the handler of ``request``.

    The supported versions default to every version the codec knows; a
    handler narrows them where older versions carry semantics we do not
    serve (e.g. Produce v0-2, whose magic 0/1 batches Kafka 4 no longer accepts).
    """

    def register(
        func: Callable[[Broker, RequestContext, R], Awaitable[Response | None]],
    ) -> Handler:
        low, high = request.VALID_VERSIONS
        HANDLERS[request.API_KEY] = HandlerEntry(
            request,
            low if min_version is None else min_version,
            high if max_version is None else max_version,
            func,
        )
        return func

    return register
