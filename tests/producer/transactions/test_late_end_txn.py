"""A commit whose EndTxn is held up in the network, then re-initialisation: on
``kafkette serve`` behind a proxy that can hold a connection's requests, the EndTxn
reaches the coordinator only after init_transactions bumped the epoch and a new
transaction started. It must not apply to that transaction: the old transaction is
aborted, the new one commits alone."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from kafkette import Producer
from kafkette.errors import KafkaTimeoutError
from kafkette.producer.transactions import ProducerTxnState
from tests.brokers import BrokerProcess, free_port
from tests.producer.transactions.helpers import read_all

END_TXN = 26


class HoldingProxy:
    """A TCP proxy to one broker; :meth:`hold` makes the connections open now keep what
    the client sends until :meth:`release` delivers it (even if the client left)."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", port))
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            connection = _Connection(client, upstream)
            with self._lock:
                self._connections.append(connection)

    def hold(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.hold()

    def release(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.release()

    def late_api_keys(self) -> list[int]:
        """API keys of the requests that were held, then delivered after the client left."""
        with self._lock:
            return [key for c in self._connections for key in c.late_api_keys]

    def close(self) -> None:
        self._closed = True
        self._server.close()
        self.release()
        with self._lock:
            for connection in self._connections:
                connection.close()


class _Connection:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.released = threading.Event()
        self.released.set()
        self.late_api_keys: list[int] = []
        self._held: list[bytes] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._requests, daemon=True).start()
        threading.Thread(target=self._responses, daemon=True).start()

    def hold(self) -> None:
        with self._lock:
            self.released.clear()

    def release(self) -> None:
        """Deliver what was held (even if the client left meanwhile)."""
        with self._lock:
            self.released.set()
            late = b"".join(self._held)
            self._held.clear()
            position = 0
            while position + 6 <= len(late):  # size (int32), then the API key (int16)
                size = int.from_bytes(late[position : position + 4], "big")
                self.late_api_keys.append(int.from_bytes(late[position + 4 : position + 6], "big"))
                position += 4 + size
            with contextlib.suppress(OSError):
                self.upstream.sendall(late)

    def _requests(self) -> None:
        try:
            while data := self.client.recv(65536):
                with self._lock:
                    if self.released.is_set():
                        self.upstream.sendall(data)
                    else:
                        self._held.append(data)
        except OSError:
            pass
        self.released.wait()
        time.sleep(0.5)  # let the broker read what was delivered late before closing
        self.close()

    def _responses(self) -> None:
        try:
            while data := self.upstream.recv(65536):
                self.client.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def test_a_late_end_txn_cannot_commit_a_later_transaction() -> None:
    proxy_port = free_port()
    with BrokerProcess(args=("--advertised-listener", f"127.0.0.1:{proxy_port}")) as broker:
        proxy = HoldingProxy(proxy_port, ("127.0.0.1", broker.port))
        bootstrap = f"127.0.0.1:{proxy_port}"
        try:
            with Producer(
                bootstrap_servers=bootstrap,
                transactional_id="late",
                request_timeout_ms=2_000,
                max_block_ms=20_000,
            ) as producer:
                producer.init_transactions()
                manager = producer._core.transactions.manager  # type: ignore[union-attr]
                epoch = manager.epoch
                producer.begin_transaction()
                producer.send("t", b"first").result(10)
                proxy.hold()
                with pytest.raises(KafkaTimeoutError):
                    producer.commit_transaction(timeout=0.3)
                # the EndTxn(commit) sits in the proxy; re-initialise over a new connection
                producer.init_transactions()
                assert manager.state is ProducerTxnState.READY and manager.epoch > epoch
                producer.begin_transaction()
                producer.send("t", b"second").result(15)
                proxy.release()  # the old EndTxn reaches the coordinator now
                time.sleep(1.0)
                assert END_TXN in proxy.late_api_keys()
                assert read_all(broker.bootstrap, "t", 1, "read_committed") == []
                producer.commit_transaction()
            records = read_all(broker.bootstrap, "t", 1, "read_committed")
            assert [value for _, _, value in records] == [b"second"]
        finally:
            proxy.close()
