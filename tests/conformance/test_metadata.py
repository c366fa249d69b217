"""Metadata and ApiVersions as independent clients see them."""

from __future__ import annotations

import socket
import struct
import subprocess

from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from kafkette.protocol.headers import decode_response
from tests.brokers import BrokerProcess


def test_confluent_kafka_sees_one_broker_and_auto_created_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(topic="orders", timeout=10)
    assert list(metadata.brokers) == [1]
    assert (metadata.brokers[1].host, metadata.brokers[1].port) == ("127.0.0.1", broker.port)
    assert metadata.controller_id == 1
    topic = metadata.topics["orders"]
    assert topic.error is None
    assert sorted(topic.partitions) == [0]
    assert topic.partitions[0].leader == 1
    assert topic.partitions[0].replicas == [1] and topic.partitions[0].isrs == [1]


def test_kcat_lists_metadata(memory_broker: BrokerProcess) -> None:
    """kcat (librdkafka 2.0) completes its ApiVersions exchange and reads metadata."""
    result = subprocess.run(
        ["kcat", "-b", memory_broker.bootstrap, "-L", "-t", "events", "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert f"broker 1 at 127.0.0.1:{memory_broker.port} (controller)" in result.stdout
    assert 'topic "events" with 1 partitions:' in result.stdout
    assert "partition 0, leader 1, replicas: 1, isrs: 1" in result.stdout


def test_kafka_python_cluster_id_is_stable_across_restart(disk_broker: BrokerProcess) -> None:
    def cluster_id() -> str:
        admin = KafkaAdminClient(bootstrap_servers=disk_broker.bootstrap, request_timeout_ms=10000)
        try:
            return str(admin.describe_cluster()["cluster_id"])
        finally:
            admin.close()

    first = cluster_id()
    disk_broker.stop()
    disk_broker.start()
    assert cluster_id() == first
    assert len(first) == 22


def test_unknown_api_versions_version_gets_v0_fallback(memory_broker: BrokerProcess) -> None:
    """An ApiVersions request newer than ours is answered at v0 with UNSUPPORTED_VERSION (35)."""
    body = struct.pack(">hhih", 18, 99, 1234, 3) + b"new" + b"\x00"
    with socket.create_connection(("127.0.0.1", memory_broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        frame = _recv_exactly(sock, size)
    correlation_id, response = decode_response(frame, 18, 0)
    assert correlation_id == 1234
    assert response.error_code == 35  # type: ignore[attr-defined]
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
    assert ranges[18] == (0, 4)
    assert ranges[3] == (0, 12)


def test_malformed_frame_closes_only_that_connection(memory_broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", memory_broker.port), timeout=10) as bad:
        bad.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert bad.recv(10) == b""  # closed by the broker
    admin = AdminClient({"bootstrap.servers": memory_broker.bootstrap})
    assert list(admin.list_topics(timeout=10).brokers) == [1]
    assert "closing connection from 127.0.0.1" in memory_broker.log()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed early"
        data += chunk
    return data
