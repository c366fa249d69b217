"""``KafketteDataSource``: the ``kafkette`` format, Spark's Kafka connector in pure Python."""

from __future__ import annotations

import attrs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import DataType, StructType

from kafkette.spark_integration.arrow_records import kafka_schema
from kafkette.spark_integration.avro.options import AvroValues, avro_request, reader_schema
from kafkette.spark_integration.options import (
    ReaderOptions,
    include_headers,
    parse_reader_options,
    single_topic,
)

OVERWRITE_REFUSED = (
    "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
    "ErrorIfExists (default)."
)


def avro_values(options: dict[str, str]) -> AvroValues | None:
    """With ``valueFormat=avro``, the reader's schema looked up now (None without)."""
    request = avro_request(options, single_topic(options))
    return None if request is None else AvroValues(request, reader_schema(request))


def source_schema(options: dict[str, str], avro: AvroValues | None) -> StructType:
    """The source's schema: Spark's Kafka schema, the ``value`` column decoded with
    ``valueFormat=avro``."""
    value_type: DataType | None = None if avro is None else avro.schema.spark_type()[0]
    return kafka_schema(include_headers(options), value_type)


def check_schema(given: StructType, options: dict[str, str], avro: AvroValues | None) -> None:
    """Refuse a user schema other than Spark's Kafka schema (the source's is fixed)."""
    expected = source_schema(options, avro)
    if given != expected and avro is not None:
        raise ValueError(
            "the value column's Avro schema changed while the query was planned: expected "
            f"{expected.simpleString()}, got {given.simpleString()}; run the query again"
        )
    if given != expected:
        raise ValueError(
            "Kafka source has a fixed schema and cannot be set with a custom one: expected "
            f"{expected.simpleString()}, got {given.simpleString()}"
        )


class KafketteDataSource(DataSource):
    """Read and write Kafka with Spark's Kafka connector's options and schema, no jar.

    ``spark.dataSource.register(KafketteDataSource)`` (or
    :func:`kafkette.spark_integration.register`), then ``format("kafkette")``.
    """

    @classmethod
    def name(cls) -> str:
        return "kafkette"

    def schema(self) -> StructType:
        options = dict(self.options)
        return source_schema(options, avro_values(options))

    def _reader_options(self, schema: StructType, *, streaming: bool) -> ReaderOptions:
        options = dict(self.options)
        avro = avro_values(options)
        check_schema(schema, options, avro)
        parsed = parse_reader_options(options, streaming=streaming)
        return attrs.evolve(parsed, value_avro=avro)

    def reader(self, schema: StructType) -> DataSourceReader:
        from kafkette.spark_integration.batch_reader import KafkaBatchReader

        return KafkaBatchReader(self._reader_options(schema, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafkette.spark_integration.stream_reader import KafkaStreamReader

        return KafkaStreamReader(self._reader_options(schema, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError(OVERWRITE_REFUSED)
        from kafkette.spark_integration.writer import KafketteBatchWriter

        return KafketteBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise ValueError(OVERWRITE_REFUSED)
        from kafkette.spark_integration.writer import KafketteStreamWriter

        return KafketteStreamWriter(self.options, schema)
