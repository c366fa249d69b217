"""A broker served over loopback TCP in a background thread, for the mutation fuzz.

:class:`FuzzBroker` runs a :class:`~kafkette.server.Broker` exactly as
``kafkette serve`` does (the TCP listener, the maintenance and group timer
loops) on an anyio event loop in its own thread, so that the test's blocking
sockets reach it by the path every client takes. :meth:`FuzzBroker.send`
sends one frame on a fresh connection; :meth:`FuzzBroker.healthy` checks,
on another fresh connection, that an ApiVersions request is answered in time.
Internal errors the broker logs (a handler raising something other than a
Kafka error) are collected in :attr:`FuzzBroker.internal_errors`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal, start_blocking_portal

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import ApiVersionsRequest
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net.listener import serve_tcp
from tests.server.fuzz_frames import TOPIC

HEALTH_TIMEOUT_S = 3.0
"""The health check of the issue: ApiVersions answered within 3 s."""

CASE_WAIT_S = 0.05
"""How long a case's answer is waited for before its connection is dropped."""

_HEALTH_FRAME = bytes(encode_request(ApiVersionsRequest("fuzz-health", "1"), 3, 99, "health"))
_HEALTH_FRAME = struct.pack(">i", len(_HEALTH_FRAME)) + _HEALTH_FRAME


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f": {type(exc).__name__}: {exc}"
        self.records.append(text)


async def _serve(broker: Broker, *, task_status: anyio.abc.TaskStatus[int]) -> None:
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_tcp, broker, "127.0.0.1", 0)
        tg.start_soon(broker.run_background)
        task_status.started(port)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


class FuzzBroker:
    """A broker in a background thread, listening on a free loopback port."""

    def __init__(self, portal: BlockingPortal, broker: Broker, port: int) -> None:
        self.portal = portal
        self.broker = broker
        self.port = port
        self._collector = _Collector()
        self.base_topics = frozenset(broker.cluster.topics)

    @property
    def internal_errors(self) -> list[str]:
        return self._collector.records

    def send(self, frame: bytes) -> None:
        """Send ``frame`` on a fresh connection, then read what comes back for a while."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=HEALTH_TIMEOUT_S) as sock:
            sock.settimeout(CASE_WAIT_S)
            try:
                sock.sendall(frame)
                sock.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + CASE_WAIT_S
                while time.monotonic() < deadline and sock.recv(65536):
                    pass
            except (TimeoutError, OSError):
                pass  # no answer yet, or closed by the broker: both are fine

    def healthy(self) -> str | None:
        """None if a fresh connection gets an ApiVersions answer in time, else what failed."""
        started = time.monotonic()
        try:
            with socket.create_connection(
                ("127.0.0.1", self.port), timeout=HEALTH_TIMEOUT_S
            ) as sock:
                sock.sendall(_HEALTH_FRAME)
                size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
                correlation, response = decode_response(_recv_exactly(sock, size), 18, 3)
        except (OSError, TimeoutError) as exc:
            return f"no ApiVersions answer after {time.monotonic() - started:.1f}s: {exc!r}"
        if correlation != 99 or response.error_code != 0:
            return f"bad ApiVersions answer: {correlation} {response!r}"
        return None

    def reset(self) -> None:
        """Delete the topics the cases created, so that their logs do not pile up."""
        if set(self.broker.cluster.topics) - self.base_topics:
            self.portal.call(self._delete_new_topics)

    async def _delete_new_topics(self) -> None:
        async with self.broker.topic_changes:
            cluster = self.broker.cluster
            extra = [name for name in cluster.topics if name not in self.base_topics]
            for name in extra:
                cluster.delete_topic(name)
            self.broker.groups.topics_deleted(extra)


@contextlib.contextmanager
def fuzz_broker(data_dir: str | None = None, **settings: Any) -> Iterator[FuzzBroker]:
    """A :class:`FuzzBroker` with the seeds' topic, stopped (and closed) on exit."""
    broker = Broker(BrokerConfig(data_dir=data_dir, port=0, **settings))
    broker.cluster.create_topic(TOPIC, 2)
    server_logger = logging.getLogger("kafkette.server")
    level, propagate = server_logger.level, server_logger.propagate
    try:
        with start_blocking_portal("asyncio") as portal:
            future, port = portal.start_task(_serve, broker)
            fuzz = FuzzBroker(portal, broker, port)
            # The cases make the broker log a line each: keep only internal errors.
            server_logger.setLevel(logging.ERROR)
            server_logger.propagate = False
            server_logger.addHandler(fuzz._collector)
            try:
                yield fuzz
            finally:
                server_logger.removeHandler(fuzz._collector)
                future.cancel()
    finally:
        server_logger.setLevel(level)
        server_logger.propagate = propagate
        broker.close()
