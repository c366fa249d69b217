"""``max.connections.per.ip``: the limit per address, its overrides, and the broker
closing a connection over the limit before serving it."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette import AdminClient
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from kafkette.errors import InvalidRequestError
from kafkette.protocol.headers import encode_request_frame
from kafkette.protocol.messages import ApiVersionsRequest
from kafkette.server.connection_quotas import ConnectionQuotas, parse_overrides
from tests.brokers import BrokerProcess


def test_quotas_count_per_address_with_overrides() -> None:
    limits = (2, {"10.0.0.9": 0, "10.0.0.8": 3})
    quotas = ConnectionQuotas(lambda: limits)
    assert [quotas.acquire("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [quotas.acquire("10.0.0.8") for _ in range(4)] == [True, True, True, False]
    assert quotas.acquire("10.0.0.9") is False
    quotas.release("10.0.0.1")
    assert quotas.open_connections("10.0.0.1") == 1
    assert quotas.acquire("10.0.0.1") is True
    limits = (5, {})
    assert quotas.limit("10.0.0.9") == 5


def test_overrides_parse_as_kafka_writes_them() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:5, broker.local:0,::1:7") == {
        "127.0.0.1": 5,
        "broker.local": 0,
        "::1": 7,
    }
    for bad in ("127.0.0.1", "127.0.0.1:x", ":3", "h:-1"):
        with pytest.raises(ValueError, match="expected HOST_OR_IP:N"):
            parse_overrides(bad)


def served(port: int) -> socket.socket | None:
    """A connection that got an ApiVersions answer, or None if the broker closed it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        sock.sendall(bytes(encode_request_frame(ApiVersionsRequest(), 0, 1, "quota-test")))
        head = sock.recv(4)
    except ConnectionError:  # closed by the broker before or after our request arrived
        head = b""
    if len(head) < 4:
        sock.close()
        return None
    (size,) = struct.unpack(">i", head)
    received = 0
    while received < size:
        received += len(sock.recv(size - received))
    return sock


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", args=("--set", "max.connections.per.ip=2"))
    try:
        yield process.start()
    finally:
        process.close()


def test_a_connection_over_the_limit_is_closed_and_a_freed_slot_serves_again(
    broker: BrokerProcess,
) -> None:
    first, second = served(broker.port), served(broker.port)
    assert first is not None and second is not None
    assert served(broker.port) is None
    first.close()
    for _ in range(50):  # the broker notices the close on its next read
        third = served(broker.port)
        if third is not None:
            break
    assert third is not None
    assert "configured maximum of 2 connections (max.connections.per.ip)" in broker.log()
    second.close()
    third.close()


def hold(port: int, count: int) -> list[socket.socket]:
    """``count`` served connections, retrying while the broker has not yet noticed
    connections closed just before (it counts them until it reads their end)."""
    held: list[socket.socket] = []
    deadline = time.monotonic() + 5
    while len(held) < count and time.monotonic() < deadline:
        sock = served(port)
        if sock is not None:
            held.append(sock)
    assert len(held) == count
    return held


def test_the_limit_changes_at_run_time(broker: BrokerProcess) -> None:
    resource = ConfigResource(ResourceType.BROKER, "1")
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.incremental_alter_configs(
            {resource: [AlterConfigOp("max.connections.per.ip.overrides", "127.0.0.1:4")]},
            timeout=10,
        ).all()
        bad = admin.incremental_alter_configs(
            {resource: [AlterConfigOp("max.connections.per.ip.overrides", "localhost")]},
            timeout=10,
        )
        with pytest.raises(InvalidRequestError, match="expected HOST_OR_IP:N"):
            bad.all()
    held = hold(broker.port, 4)
    assert served(broker.port) is None
    for sock in held:
        sock.close()
