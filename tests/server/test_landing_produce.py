"""Produce over TCP into a memory log that keeps batches where they were received.

Large Produce requests land in the connection's landing arena
(kafkette.backends.pages.landing); the memory log keeps their batches there. A fetch
over the same listener returns byte for byte what a disk broker returns for the
same requests, and the stored batches are views of the landing arena.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from kafkette.backends import memory
from kafkette.backends.pages.landing import landed_arena
from kafkette.protocol.headers import decode_response
from kafkette.protocol.messages import ProduceRequest
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.server import Broker, BrokerConfig
from tests.server.test_direct_write import FETCH, batch, frame, serving

VALUES = [bytes([i]) * (50_000 + 9_000 * i) for i in range(12)]
"""Batches of 50 to 149 kB: the requests from the third on land (LAND_FROM is 64 KiB)."""


def produce(value: bytes, correlation_id: int) -> bytes:
    request = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[TopicProduceData("big", [PartitionProduceData(0, batch(value))])],
    )
    return frame(request, 9, correlation_id)


def read_frame(sock: socket.socket) -> bytes:
    def exactly(size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = sock.recv(size - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def produce_then_fetch(port: int) -> tuple[list[int], bytes]:
    """The produce answers' base offsets (all requests pipelined), then a fetch's records."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"".join(produce(value, i) for i, value in enumerate(VALUES)))
        offsets = []
        for _ in VALUES:
            _, answer = decode_response(read_frame(sock), ProduceRequest.API_KEY, 9)
            partition = answer.responses[0].partition_responses[0]
            assert partition.error_code == 0
            offsets.append(partition.base_offset)
        sock.sendall(frame(FETCH, 12, 99))
        _, fetched = decode_response(read_frame(sock), FETCH.API_KEY, 12)
        records = fetched.responses[0].partitions[0].records
        assert records is not None
        return offsets, bytes(records)


def created(data_dir: Path | None) -> Broker:
    broker = Broker(BrokerConfig(data_dir=str(data_dir) if data_dir is not None else None))
    broker.cluster.create_topic("big", 1)
    return broker


def test_landed_batches_are_kept_and_fetched_as_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory, "ARENA_FROM", 0)  # arena batches from the first one
    disk_offsets, disk_records = serving(created(tmp_path / "data"), produce_then_fetch)
    broker = created(None)
    offsets, records = serving(broker, produce_then_fetch)
    assert offsets == disk_offsets == list(range(len(VALUES)))
    assert records == disk_records
    assert len(records) == sum(len(batch(value)) for value in VALUES)
    segment = broker.cluster.get_partition("big", 0).log.segments[-1]  # type: ignore[attr-defined]
    stored = [segment.batch_bytes(position, 0) for position, _ in segment.headers()]
    assert [landed_arena(view) is not None for view in stored] == [False] * 2 + [True] * 10
    assert b"".join(bytes(view) for view in stored) == records
