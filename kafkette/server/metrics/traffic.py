"""Bytes and records in, bytes out per topic, counted from Produce and Fetch as they are served.

In: the record batches of a Produce request whose partition was appended (its answer
has no error; an acks=0 request that was answered at all was appended), their bytes
(Kafka's ``BytesInPerSec``) and records (``MessagesInPerSec``, read from the batch
headers). Out: the bytes of the batches a Fetch answer carries (``BytesOutPerSec``).
Records out are not counted, as Kafka does not: a disk log's answer is a file region
sent with ``sendfile``, and reading each batch's header to count its records made a
disk Fetch up to twice as slow (measured, #32).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from kafkette.protocol.messages import FetchResponse, ProduceRequest, ProduceResponse

_HEADER = struct.Struct(">8xi4xb40xi")
"""Of a v2 batch header: batchLength (at 8), magic (at 16), recordsCount (at 57)."""
_LOG_OVERHEAD = 12  # baseOffset and batchLength, not counted in batchLength


def count_records(data: bytes | bytearray | memoryview) -> int:
    """The records in whole batches laid end to end (a v0/v1 message counts one)."""
    size = len(data)
    position = 0
    records = 0
    unpack = _HEADER.unpack_from
    while position + _HEADER.size <= size:
        length, magic, count = unpack(data, position)
        records += count if magic >= 2 else 1
        if length <= 0:
            break
        position += _LOG_OVERHEAD + length
    return records


class TopicTraffic:
    """Bytes and records in, bytes out per topic (``topic_name`` resolves a topic id)."""

    def __init__(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        self._topic_name = topic_name
        self.bytes_in: dict[str, int] = {}
        self.records_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}

    def produced(self, request: ProduceRequest, response: ProduceResponse | None) -> None:
        """Count what a served Produce request appended."""
        failed: set[tuple[str, int]] | None = None  # made for the first error only
        if response is not None:
            for topic in response.responses:
                for partition in topic.partition_responses:
                    if partition.error_code:
                        if failed is None:
                            failed = set()
                        failed.add((topic.name, partition.index))
        bytes_in = self.bytes_in
        records_in = self.records_in
        for topic_data in request.topic_data:
            name = topic_data.name
            for data in topic_data.partition_data:
                records = data.records
                if not records or (failed is not None and (name, data.index) in failed):
                    continue
                bytes_in[name] = bytes_in.get(name, 0) + len(records)
                records_in[name] = records_in.get(name, 0) + count_records(records)

    def fetched(self, response: FetchResponse) -> None:
        """Count what a Fetch answer carries."""
        for topic in response.responses:
            name: str | None = topic.topic
            for partition in topic.partitions:
                records = partition.records
                if records is None or not len(records):
                    continue
                if not name:
                    name = self._topic_name(topic.topic_id) or str(topic.topic_id)
                self.bytes_out[name] = self.bytes_out.get(name, 0) + len(records)
