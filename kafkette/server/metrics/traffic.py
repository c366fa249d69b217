"""Bytes and records in and out per topic, counted from Produce and Fetch as they are served.

In: the record batches of a Produce request whose partition was appended (its answer
has no error; an acks=0 request that was answered at all was appended). Out: the
batches a Fetch answer carries. Bytes are the batches' sizes, as Kafka's
``BytesInPerSec`` and ``BytesOutPerSec`` count them; records are the batches' record
counts (Kafka's ``MessagesInPerSec``), read from their headers: in memory for a
memory log and a request, with one small read per batch for a disk log's region
(the page cache holds what was just written or read).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kafkette.protocol.messages import FetchResponse, ProduceRequest, ProduceResponse

_LENGTH_AT = 8  # batchLength: int32 after baseOffset
_MAGIC_AT = 16
_COUNT_AT = 57  # recordsCount: the last field of a v2 batch header
_HEADER = 61
_LOG_OVERHEAD = 12  # baseOffset and batchLength, not counted in batchLength


def count_records(data: bytes | bytearray | memoryview) -> int:
    """The records in whole batches laid end to end (a v0/v1 message counts one)."""
    view = memoryview(data)
    size = len(view)
    position = 0
    records = 0
    while position + _LOG_OVERHEAD <= size:
        length = int.from_bytes(view[position + _LENGTH_AT : position + _LOG_OVERHEAD], "big")
        if position + _HEADER <= size and view[position + _MAGIC_AT] >= 2:
            records += int.from_bytes(view[position + _COUNT_AT : position + _HEADER], "big")
        else:
            records += 1
        position += _LOG_OVERHEAD + length
    return records


def _count_region(file: Any, start: int, size: int) -> int:
    """:func:`count_records` over a disk log's region, reading each batch's header only."""
    position = start
    end = start + size
    records = 0
    while position + _LOG_OVERHEAD <= end:
        header = file.pread(min(_HEADER, end - position), position)
        if len(header) < _LOG_OVERHEAD:
            break
        length = int.from_bytes(header[_LENGTH_AT:_LOG_OVERHEAD], "big")
        if len(header) == _HEADER and header[_MAGIC_AT] >= 2:
            records += int.from_bytes(header[_COUNT_AT:_HEADER], "big")
        else:
            records += 1
        position += _LOG_OVERHEAD + length
    return records


def _slice_records(records: Any) -> int:
    """Records in a Fetch answer's ``records``: bytes, or a log's slice (views or a region)."""
    if isinstance(records, bytes | bytearray | memoryview):
        return count_records(records)
    file = getattr(records, "file", None)
    if file is not None:
        return _count_region(file, records.position, records.size)
    return sum(count_records(view) for view in records.buffers)


class TopicTraffic:
    """Bytes and records in and out per topic (``topic_name`` resolves a topic id)."""

    def __init__(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        self._topic_name = topic_name
        self.bytes_in: dict[str, int] = {}
        self.records_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.records_out: dict[str, int] = {}

    def produced(self, request: ProduceRequest, response: ProduceResponse | None) -> None:
        """Count what a served Produce request appended."""
        failed: set[tuple[str, int]] = set()
        if response is not None:
            for topic in response.responses:
                for partition in topic.partition_responses:
                    if partition.error_code:
                        failed.add((topic.name, partition.index))
        for topic_data in request.topic_data:
            name = topic_data.name
            for data in topic_data.partition_data:
                records = data.records
                if not records or (failed and (name, data.index) in failed):
                    continue
                self.bytes_in[name] = self.bytes_in.get(name, 0) + len(records)
                self.records_in[name] = self.records_in.get(name, 0) + count_records(records)

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
                self.records_out[name] = self.records_out.get(name, 0) + _slice_records(records)
