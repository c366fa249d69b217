"""kafkette.spark_integration: a PySpark data source for Kafka (format ``kafkette``).

Spark's Kafka connector's options and schema in pure Python (no jar):
``spark.read.format("kafkette").option("kafka.bootstrap.servers", ...)``.
Needs the ``spark`` extra (pyspark 4.2+, pyarrow). With ``valueFormat=avro`` and
``schema.registry.url`` values framed for a schema registry are read as Spark
columns and written from them (:mod:`.avro`; the ``avro`` extra too).
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"kafkette.spark_integration needs PySpark and PyArrow ({error}): "
        "pip install kafkette[spark]"
    ) from error

from kafkette.spark_integration.sink import KafkaSink
from kafkette.spark_integration.source import KafketteDataSource


def register(spark: Any) -> None:
    """Register the ``kafkette`` format with a SparkSession."""
    spark.dataSource.register(KafketteDataSource)


__all__ = ["KafkaSink", "KafketteDataSource", "register"]
