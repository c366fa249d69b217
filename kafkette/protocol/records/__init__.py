"""Kafka record batches: magic 2 batches, legacy message sets, codecs, control records.

Build with :class:`RecordBatchBuilder` (or :class:`LegacyBatchBuilder`), read
with :func:`iter_batches` or :meth:`RecordBatch.from_buffer`; every reader
hands out :class:`Record` tuples.
"""

from kafkette.protocol.records.batch_header import BatchHeader
from kafkette.protocol.records.batches import iter_batches
from kafkette.protocol.records.compression import (
    CODEC_NAMES,
    DEFAULT_MAX_DECOMPRESSED,
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    codec_id,
    compress,
    decompress,
)
from kafkette.protocol.records.control import (
    ControlRecord,
    ControlRecordType,
    build_control_batch,
    parse_control_record,
)
from kafkette.protocol.records.default_records import RecordBatch, RecordBatchBuilder
from kafkette.protocol.records.legacy_records import LegacyBatch, LegacyBatchBuilder
from kafkette.protocol.records.record import Header, Record

__all__ = [
    "CODEC_NAMES",
    "DEFAULT_MAX_DECOMPRESSED",
    "GZIP",
    "LZ4",
    "NO_COMPRESSION",
    "SNAPPY",
    "ZSTD",
    "BatchHeader",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyBatch",
    "LegacyBatchBuilder",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "build_control_batch",
    "codec_id",
    "compress",
    "decompress",
    "iter_batches",
    "parse_control_record",
]
