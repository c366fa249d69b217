"""Why a connection to a broker failed, in words a user can act on.

A broker that closes a connection says nothing about why. A plaintext client
on a TLS listener, a TLS client on a plaintext one and a client without SASL
on a SASL listener all look alike from the client's side: the broker closes
the connection during the handshake or at the first request. When that
happens, :func:`speaks_tls`, :func:`speaks_plaintext_kafka` and
:func:`sasl_mechanisms` ask the listener on a fresh connection what it does
speak, so that the error names the mismatch (and is not retried for a
minute); a probe that learns nothing leaves the failure an ordinary,
retriable one.

:func:`describe_os_error` turns a socket error into the reason and the thing
to check; :class:`FailureLog` logs a connection failure once, not at every
retry, as librdkafka does. :func:`unresolvable_hosts` finds the bootstrap
servers whose names certainly do not resolve, so that a client refuses them
at construction ("No resolvable bootstrap urls", as librdkafka).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator

import anyio
import anyio.abc

from kafkette.client.pipes import connect_stream
from kafkette.client.wire import ClientWire
from kafkette.protocol.errors import DecodeError, ProtocolError
from kafkette.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkette.protocol.schema import Request, Response

_UNSUPPORTED_SASL_MECHANISM = 33

_HINTS = {
    errno.ECONNREFUSED: "is a broker listening at this address? check bootstrap.servers, "
    "and the address the broker advertises (advertised.listeners)",
    errno.EHOSTUNREACH: "is the host reachable from here (network, firewall)?",
    errno.ENETUNREACH: "is the host reachable from here (network, firewall)?",
    errno.ETIMEDOUT: "is the host reachable from here (network, firewall)?",
}


def causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, most recent first."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def describe_os_error(exc: OSError, host: str) -> str:
    """The reason a TCP connection failed, with what to check (``Connection refused:
    is a broker listening ...``)."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host {host!r}: {exc.strerror or exc}: check the host name"
    # asyncio says "Connect call failed (...)" and anyio "All connection attempts failed":
    # the errno (here or in the error they were raised from) says why
    for cause in causes(exc):
        number = getattr(cause, "errno", None)
        if isinstance(cause, OSError) and isinstance(number, int) and number > 0:
            reason = os.strerror(number)
            hint = _HINTS.get(number)
            return f"{reason}: {hint}" if hint else reason
    return str(exc) or type(exc).__name__


def ssl_alert(exc: BaseException | None) -> ssl.SSLError | None:
    """The TLS error in ``exc``'s chain that the peer or the handshake itself raised (a
    certificate that does not verify, an alert), not a mere end of the connection."""
    for cause in causes(exc):
        if isinstance(cause, ssl.SSLError) and not isinstance(
            cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
        ):
            return cause
    return None


def describe_ssl_error(exc: ssl.SSLError) -> str:
    """An OpenSSL error without its source location: ``certificate verify failed: ...``."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return text.split(" (_ssl.c:")[0]


# The resolver's answers that a name does not exist; a temporary failure (EAI_AGAIN) or
# no answer in time leaves the question open.
_NO_SUCH_NAME = {
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
}


def unresolvable_hosts(hosts: Iterable[str], timeout_s: float) -> dict[str, str]:
    """The names among ``hosts`` that certainly do not resolve, with the resolver's reason.

    IP addresses need no lookup, and a name under ``.invalid`` never resolves (RFC 6761).
    Other names are looked up in parallel, each in a daemon thread, for at most
    ``timeout_s`` in all: a lookup still running then, or failing temporarily, does not
    count as unresolvable (the connection attempts will tell).
    """
    found: dict[str, str] = {}
    lookups: list[threading.Thread] = []

    def lookup(host: str) -> None:
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in _NO_SUCH_NAME:
                found[host] = exc.strerror or str(exc)
        except (OSError, UnicodeError) as exc:  # a name the resolver cannot even encode
            found[host] = str(exc)

    for host in dict.fromkeys(hosts):
        try:
            ipaddress.ip_address(host)
            continue
        except ValueError:
            pass
        name = host.lower().rstrip(".")
        if name == "invalid" or name.endswith(".invalid"):
            found[host] = "a name under .invalid never resolves (RFC 6761)"
            continue
        thread = threading.Thread(
            target=lookup, args=(host,), name=f"kafkette resolve {host}", daemon=True
        )
        thread.start()
        lookups.append(thread)
    deadline = time.monotonic() + timeout_s
    for thread in lookups:
        thread.join(max(deadline - time.monotonic(), 0))
    return dict(found)


class FailureLog:
    """Logs each address's connection failure once: its first failure, then only a
    failure for another reason; repeats go to the debug level (librdkafka suppresses
    an error identical to the last one too). A success forgets the address."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._last: dict[str, str] = {}

    def failed(self, address: str, error: BaseException) -> None:
        text = str(error)
        if self._last.get(address) == text:
            self._logger.debug("%s (again)", text)
            return
        self._last[address] = text
        self._logger.warning("%s", text)

    def connected(self, address: str) -> None:
        self._last.pop(address, None)


# ---- probes: what does the listener speak?

_GONE: tuple[type[BaseException], ...] = (
    OSError,  # ssl.SSLError too
    TimeoutError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    DecodeError,
    ProtocolError,
)


def _unverified_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether the listener at ``host:port`` answers a TLS handshake (its certificate is
    not checked: the question is only what it speaks)."""
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(
                host, port, ssl_context=_unverified_context(), tls_standard_compatible=False
            )
    except ssl.SSLError as exc:
        # an alert (it wants a client certificate, say) comes from a TLS peer
        return "ALERT" in str(exc.reason)
    except _GONE:
        return False
    await _close(stream)
    return True


async def speaks_plaintext_kafka(
    host: str, port: int, timeout_s: float, client_id: str | None
) -> bool:
    """Whether the listener at ``host:port`` answers an ApiVersions request sent without TLS."""
    response = await _exchange_once(host, port, None, ApiVersionsRequest(), 0, timeout_s, client_id)
    return isinstance(response, ApiVersionsResponse)


async def sasl_mechanisms(
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    timeout_s: float,
    client_id: str | None,
) -> list[str] | None:
    """The SASL mechanisms the listener at ``host:port`` offers, or None when it does not
    expect SASL (or could not tell): a SaslHandshake (KIP-43) is accepted by a SASL
    listener only; a listener without SASL answers it with ILLEGAL_SASL_STATE. Some
    brokers (Tansu) accept a handshake where SASL is optional, so a listener that answers
    a Metadata request without authentication does not expect SASL either."""
    unauthenticated = await _exchange_once(
        host, port, ssl_context, MetadataRequest(topics=[]), 1, timeout_s, client_id
    )
    if isinstance(unauthenticated, MetadataResponse):
        return None
    response = await _exchange_once(
        host, port, ssl_context, SaslHandshakeRequest(mechanism="PLAIN"), 1, timeout_s, client_id
    )
    if not isinstance(response, SaslHandshakeResponse):
        return None
    if response.error_code not in (0, _UNSUPPORTED_SASL_MECHANISM):
        return None
    return list(response.mechanisms)


async def _exchange_once(
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    request: Request,
    version: int,
    timeout_s: float,
    client_id: str | None,
) -> Response | None:
    """One request on a fresh connection, closed afterwards; None if nothing came back."""
    wire = ClientWire(client_id)
    correlation_id, frame = wire.send(request, version)
    try:
        with anyio.fail_after(timeout_s):
            stream = await connect_stream(host, port, ssl_context)
            try:
                await stream.send(bytes(frame))
                while True:
                    for answered, response in wire.receive_data(await stream.receive()):
                        if answered == correlation_id:
                            return response
            finally:
                await _close(stream)
    except _GONE:
        return None


async def _close(stream: anyio.abc.ByteStream) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(*_GONE):
        await stream.aclose()
