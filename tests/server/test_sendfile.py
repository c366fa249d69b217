"""Fetch responses from disk logs go from the segment file to the socket with os.sendfile."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import anyio
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.protocol.messages import FetchRequest, FetchResponse, ProduceRequest
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import RecordBatchBuilder, iter_batches
from kafkette.server import Broker, BrokerConfig
from kafkette.server.net import listener as listener_module
from kafkette.server.net.listener import serve_tcp


def _batch(start: int, count: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(start, start + count):
        builder.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * 200 + b"%d" % i)
    return builder.build()


@pytest.mark.anyio
@pytest.mark.parametrize("storage", ["disk", "memory"])
@pytest.mark.parametrize("connections", ["auto", "socket"])
async def test_fetch_uses_sendfile_for_disk_segments(
    storage: str, connections: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_sendfile = os.sendfile

    def spy(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        calls.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(listener_module.os, "sendfile", spy)
    data_dir = str(tmp_path / "data") if storage == "disk" else None
    broker = Broker(BrokerConfig(data_dir=data_dir))
    broker.cluster.create_topic("t", 1)
    batches = [_batch(0, 50), _batch(50, 50)]
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve_tcp, connections=connections), broker, "127.0.0.1", 0
        )
        async with await BrokerConnection.connect("127.0.0.1", port) as connection:
            for batch in batches:
                await connection.request(
                    ProduceRequest(
                        acks=1,
                        timeout_ms=5000,
                        topic_data=[TopicProduceData("t", [PartitionProduceData(0, batch)])],
                    )
                )
            response = await connection.request(
                FetchRequest(
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=10 << 20,
                    topics=[
                        FetchTopic(
                            topic="t",
                            partitions=[
                                FetchPartition(0, fetch_offset=0, partition_max_bytes=1 << 20)
                            ],
                        )
                    ],
                ),
                version=12,
            )
        tg.cancel_scope.cancel()
    broker.close()
    assert isinstance(response, FetchResponse)
    records_data = response.responses[0].partitions[0].records
    assert records_data is not None
    records = [r for b in iter_batches(records_data) for r in b]
    assert [r.offset for r in records] == list(range(100))
    assert [r.key for r in records] == [b"k%d" % i for i in range(100)]
    assert records[99].value == b"v" * 200 + b"99"
    stored = sum(len(b) for b in batches)
    if storage == "disk":
        assert sum(calls) == stored == len(records_data)
    else:
        assert calls == []  # memory logs are sent from their buffers
