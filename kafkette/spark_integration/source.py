"""``KafketteDataSource``: the ``kafkette`` format, Spark's Kafka connector in pure Python."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kafkette.spark_integration.arrow_records import kafka_schema
from kafkette.spark_integration.options import include_headers, parse_reader_options

OVERWRITE_REFUSED = (
    "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
    "ErrorIfExists (default)."
)


def check_schema(given: StructType, options: dict[str, str]) -> None:
    """Refuse a user schema other than Spark's Kafka schema (the source's is fixed)."""
    expected = kafka_schema(include_headers(options))
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
        return kafka_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        from kafkette.spark_integration.batch_reader import KafkaBatchReader

        check_schema(schema, dict(self.options))
        return KafkaBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafkette.spark_integration.stream_reader import KafkaStreamReader

        check_schema(schema, dict(self.options))
        return KafkaStreamReader(parse_reader_options(self.options, streaming=True))

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
