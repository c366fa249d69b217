"""kafkette.spark_integration: Kafka for PySpark without a connector jar (extra ``spark``)."""

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"kafkette.spark_integration needs PySpark and PyArrow ({error}): "
        "pip install kafkette[spark]"
    ) from error
