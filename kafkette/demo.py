"""A short tour of kafkette's protocol layer: ``python -m kafkette.demo``.

It does what a producer and a broker do with bytes, without a network: build a
compressed record batch, wrap it in a ProduceRequest, frame it, feed the frame
to a decoder in small chunks, parse the request as a broker would, and read
the records back. (It becomes ``kafkette serve`` plus an end-to-end run once
the broker exists.)
"""

from __future__ import annotations

import time

from kafkette.protocol.framing import FrameDecoder, encode_frame
from kafkette.protocol.headers import decode_request, encode_request
from kafkette.protocol.messages import ProduceRequest
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import LZ4, RecordBatchBuilder, iter_batches


def main() -> None:
    """Run the demo and print what happened at each step."""
    now = int(time.time() * 1000)
    builder = RecordBatchBuilder(
        compression=LZ4, producer_id=1000, producer_epoch=0, base_sequence=0
    )
    for i in range(1000):
        builder.append(now, f"key-{i % 10}".encode(), f"order {i}".encode(), [("source", b"demo")])
    batch = builder.build()
    print(f"built a record batch: 1000 records, lz4, {len(batch)} bytes")

    request = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name="orders", partition_data=[PartitionProduceData(0, batch)])
        ],
    )
    frame = encode_frame(bytes(encode_request(request, 9, correlation_id=1, client_id="demo")))
    print(f"framed a ProduceRequest v9 (flexible): {len(frame)} bytes")

    decoder = FrameDecoder(max_frame_size=100 * 1024 * 1024)
    for start in range(0, len(frame), 100):
        decoder.feed(frame[start : start + 100])
    body = decoder.next_frame()
    assert body is not None
    header, parsed = decode_request(body)
    assert isinstance(parsed, ProduceRequest)
    print(
        f"broker side: api key {header.request_api_key} v{header.request_api_version}, "
        f"client {header.client_id!r}, correlation id {header.correlation_id}"
    )

    records_data = parsed.topic_data[0].partition_data[0].records
    assert records_data is not None
    records = [r for b in iter_batches(records_data) for r in b]
    first, last = records[0], records[-1]
    print(f"read back {len(records)} records")
    print(f"  first: offset {first.offset}, {first.key!r} -> {first.value!r}, {first.headers}")
    print(f"  last:  offset {last.offset}, {last.key!r} -> {last.value!r}")


if __name__ == "__main__":
    main()
