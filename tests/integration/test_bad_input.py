"""Bad, slow and many clients against ``kafkette serve``.

Whatever one client sends, the broker answers it or closes that connection
(as Kafka does) and keeps serving everybody else: each test checks with a
fresh raw-socket request, and some with confluent-kafka, after the abuse.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import ApiVersionsRequest, MetadataRequest
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.protocol.schema import Request
from tests.brokers import BrokerProcess

TIMEOUT_S = 10.0
TLS_CLIENT_HELLO = bytes.fromhex(
    "16030100a5010000a10303" + "00" * 32 + "000020c02bc02fc02cc030cca9cca8c013c014009c009d"
    "002f0035000a0100005800000018001600001365787465726e616c2e6578616d706c652e636f6d"
)


def frame(request: Request, version: int, correlation_id: int) -> bytes:
    body = encode_request(request, version, correlation_id, "bad-input-test")
    return struct.pack(">i", len(body)) + bytes(body)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_response(sock: socket.socket, api_key: int, version: int) -> tuple[int, object]:
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return decode_response(recv_exactly(sock, size), api_key, version)


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S)


def assert_closed_by_broker(sock: socket.socket) -> None:
    """The broker closes: recv sees end of stream (or a reset), never data."""
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1024) == b""


def assert_serving(broker: BrokerProcess) -> None:
    """A fresh connection gets a correct ApiVersions answer."""
    with connect(broker) as sock:
        sock.sendall(frame(ApiVersionsRequest(), 3, 4242))
        correlation_id, response = read_response(sock, 18, 3)
    assert correlation_id == 4242
    assert response.error_code == 0  # type: ignore[attr-defined]
    assert {k.api_key for k in response.api_keys} >= {0, 1, 3, 18, 19}  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def shared_broker() -> Iterator[BrokerProcess]:
    """One memory broker for the whole module: these tests abuse connections, not data."""
    with BrokerProcess(None) as broker:
        yield broker


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http"),
        pytest.param(TLS_CLIENT_HELLO, id="tls-client-hello"),
        pytest.param(struct.pack(">I", 2**31) + b"\x00" * 16, id="2GiB-negative-size"),
        pytest.param(struct.pack(">i", 2**31 - 1) + b"\x00" * 16, id="2GiB-size"),
        pytest.param(struct.pack(">i", 104_857_601), id="just-over-100MiB"),
        pytest.param(struct.pack(">ihhi", 8, 999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhih", 10, 3, 12, 1, 50), id="truncated-header"),
    ],
)
def test_garbage_closes_only_that_connection(shared_broker: BrokerProcess, garbage: bytes) -> None:
    """Non-Kafka bytes close that connection; an older one keeps being served."""
    with connect(shared_broker) as bystander:
        bystander.sendall(frame(ApiVersionsRequest(), 3, 1))
        assert read_response(bystander, 18, 3)[0] == 1
        with connect(shared_broker) as bad:
            bad.sendall(garbage)
            assert_closed_by_broker(bad)
        # the connection opened before is still served
        bystander.sendall(frame(MetadataRequest(topics=[]), 12, 2))
        assert read_response(bystander, 3, 12)[0] == 2
    assert_serving(shared_broker)


def test_declared_huge_frame_is_refused_before_allocation(shared_broker: BrokerProcess) -> None:
    """Declared sizes never allocate: memory stays flat, oversize closes."""
    assert shared_broker.process is not None
    before = _rss_kib(shared_broker.process.pid)
    for _ in range(20):
        with connect(shared_broker) as bad:
            bad.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 1024)
            # under the limit: the broker waits for the rest, holding only what arrived
        with connect(shared_broker) as bad:
            bad.sendall(struct.pack(">i", 2**31 - 1))
            assert_closed_by_broker(bad)
    assert _rss_kib(shared_broker.process.pid) - before < 50 * 1024
    assert "exceeds the limit of 104857600 bytes" in shared_broker.log()
    assert_serving(shared_broker)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_request_sent_one_byte_at_a_time(shared_broker: BrokerProcess) -> None:
    """A request trickled byte by byte is answered correctly."""
    request = frame(MetadataRequest(topics=[MetadataRequestTopic(name="bytewise")]), 9, 77)
    with connect(shared_broker) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(request)):
            sock.sendall(request[i : i + 1])
            if i % 8 == 0:
                time.sleep(0.001)
        correlation_id, response = read_response(sock, 3, 9)
    assert correlation_id == 77
    (topic,) = response.topics  # type: ignore[attr-defined]
    assert (topic.name, topic.error_code, len(topic.partitions)) == ("bytewise", 0, 1)


def test_slow_client_does_not_stall_others(shared_broker: BrokerProcess) -> None:
    """A half-sent request does not delay other clients."""
    request = frame(ApiVersionsRequest(), 3, 5)
    with connect(shared_broker) as slow:
        slow.sendall(request[:7])  # half a request, then silence
        started = time.monotonic()
        assert_serving(shared_broker)
        assert time.monotonic() - started < 2.0
        slow.sendall(request[7:])
        assert read_response(slow, 18, 3)[0] == 5


def test_client_vanishing_mid_request(shared_broker: BrokerProcess) -> None:
    """Clients closing or resetting mid-request are logged and forgotten."""
    request = frame(MetadataRequest(topics=None), 12, 9)
    for cut in (2, 4, len(request) // 2, len(request) - 1):
        with connect(shared_broker) as sock:
            sock.sendall(request[:cut])
    with connect(shared_broker) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(request[:10])  # then a reset instead of a clean close
    assert_serving(shared_broker)
    deadline = time.monotonic() + TIMEOUT_S
    while "went away in the middle of a request" not in shared_broker.log():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_pipelined_requests_answered_in_order(shared_broker: BrokerProcess) -> None:
    """50 requests written at once are answered in order."""
    requests = []
    for correlation_id in range(1000, 1050):
        if correlation_id % 2:
            requests.append(frame(ApiVersionsRequest(), 3, correlation_id))
        else:
            requests.append(frame(MetadataRequest(topics=None), 12, correlation_id))
    with connect(shared_broker) as sock:
        sock.sendall(b"".join(requests))
        answers = []
        for correlation_id in range(1000, 1050):
            api_key = 18 if correlation_id % 2 else 3
            version = 3 if correlation_id % 2 else 12
            answered, response = read_response(sock, api_key, version)
            answers.append(answered)
            if api_key == 18:
                assert response.error_code == 0  # type: ignore[attr-defined]
            else:
                assert [b.node_id for b in response.brokers] == [1]  # type: ignore[attr-defined]
    assert answers == list(range(1000, 1050))


def test_many_idle_connections(shared_broker: BrokerProcess) -> None:
    """500 idle connections stay live and do not stop new clients."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    idle: list[socket.socket] = []
    try:
        idle.extend(connect(shared_broker) for _ in range(500))
        assert_serving(shared_broker)
        # every one of them is live: the last and a middle one can still talk
        for sock, correlation_id in ((idle[-1], 11), (idle[250], 12)):
            sock.sendall(frame(ApiVersionsRequest(), 3, correlation_id))
            assert read_response(sock, 18, 3)[0] == correlation_id
        admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
        assert list(admin.list_topics(timeout=TIMEOUT_S).brokers) == [1]
    finally:
        for sock in idle:
            sock.close()
    assert_serving(shared_broker)


def test_idle_connection_closed_after_connections_max_idle_ms() -> None:
    """connections.max.idle.ms closes a silent connection."""
    with BrokerProcess(None, args=("--set", "connections.max.idle.ms=300")) as broker:
        with connect(broker) as sock:
            sock.sendall(frame(ApiVersionsRequest(), 3, 1))
            assert read_response(sock, 18, 3)[0] == 1
            started = time.monotonic()
            assert_closed_by_broker(sock)
            assert 0.25 < time.monotonic() - started < TIMEOUT_S
        assert "idle for 300 ms" in broker.log()
        assert_serving(broker)
