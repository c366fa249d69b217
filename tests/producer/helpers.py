"""Producer test helpers: read back with confluent-kafka; a TCP proxy that drops connections."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class Stored(NamedTuple):
    """A record as confluent-kafka reads it back."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` on a broker with confluent-kafka's admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(20)


def read_back(
    bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 30
) -> list[Stored]:
    """All ``count`` records of ``topic``, read from the beginning of each partition.

    Sorted by (partition, offset). Fails if fewer arrive within ``timeout_s``,
    and waits a little after ``count`` to catch records beyond it.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"readback-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: list[Stored] = []
        deadline = time.monotonic() + timeout_s
        extra_until: float | None = None
        while time.monotonic() < deadline:
            if len(records) >= count:
                extra_until = extra_until or time.monotonic() + 0.3
                if time.monotonic() >= extra_until:
                    break
            for msg in consumer.consume(10_000, 0.1):
                if msg.error():
                    raise AssertionError(f"consumer error: {msg.error()}")
                records.append(
                    Stored(
                        str(msg.topic()),
                        int(msg.partition()),
                        int(msg.offset()),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                        int(msg.timestamp()[1]),
                    )
                )
        assert len(records) >= count, f"read {len(records)} of {count} records"
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


class DroppingProxy:
    """A TCP proxy to one broker whose connections can all be cut at once."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", port))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.accepted = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
                self.accepted += 1
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def drop_all(self) -> int:
        """Cut every open connection; returns how many pairs were cut."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        return len(sockets) // 2

    def close(self) -> None:
        self._closed = True
        self._server.close()
        self.drop_all()
