"""How many transactions KafkaSink writes a micro-batch in (:func:`writers_needed`):
enough for the rows and for the bytes, at least one, at most the cap; and the rows and
bytes it counts in a DataFrame."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from kafkette.spark_integration import KafkaSink
from kafkette.spark_integration.sink import (
    BYTES_PER_TRANSACTION,
    ROWS_PER_TRANSACTION,
    writers_needed,
)

MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("rows", "size", "expected"),
    [
        (0, 0, 1),  # an empty batch: one (empty) partition, no transaction opened
        (500, 50_000, 1),
        (ROWS_PER_TRANSACTION, 0, 1),
        (ROWS_PER_TRANSACTION + 1, 0, 2),
        (10 * ROWS_PER_TRANSACTION, 0, 10),
        (10, BYTES_PER_TRANSACTION, 1),
        (10, BYTES_PER_TRANSACTION + 1, 2),
        (250_000, 3 * BYTES_PER_TRANSACTION, 3),  # the bytes need more than the rows
        (10**9, 10**12, 200),  # at most the cap (spark.sql.shuffle.partitions)
    ],
)
def test_writers_needed_with_the_defaults(rows: int, size: int, expected: int) -> None:
    assert writers_needed(rows, size, most=200) == expected


def test_writers_needed_with_other_limits() -> None:
    def needed(rows: int, size: int, most: int = 200) -> int:
        return writers_needed(
            rows, size, rows_per_transaction=100, bytes_per_transaction=1000, most=most
        )

    assert [needed(n, 0) for n in (1, 100, 101, 250, 300, 301)] == [1, 1, 2, 3, 3, 4]
    assert [needed(1, b) for b in (999, 1000, 1001, 5000)] == [1, 1, 2, 5]
    assert needed(10_000, 0, most=2) == 2


@pytest.mark.parametrize(
    "name", ["num_partitions", "rows_per_transaction", "bytes_per_transaction"]
)
def test_sizes_must_be_positive(name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be positive, got 0$"):
        KafkaSink("127.0.0.1:9092", "out", **{name: 0})


def test_a_batch_is_sized_by_its_rows_and_the_bytes_of_its_keys_and_values(
    spark: SparkSession,
) -> None:
    """20 rows, keys of 2 or 3 bytes (50), values of 10 bytes but one null (190): 240
    bytes; at most spark.sql.shuffle.partitions (2 in the tests' session)."""
    rows = [(f"k{n}", None if n == 3 else b"v" * 10, n) for n in range(20)]
    df = spark.createDataFrame(rows, "key string, value binary, n int")

    def partitions(**sizes: int) -> int:
        return KafkaSink("127.0.0.1:9092", "out", **sizes).partitions_for(df)

    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert partitions() == 1
    assert partitions(bytes_per_transaction=240) == 1
    assert partitions(bytes_per_transaction=239) == 2
    assert partitions(bytes_per_transaction=10) == 2  # 24 wanted, the cap
    assert partitions(rows_per_transaction=19) == 2
    assert partitions(num_partitions=5) == 5  # as given, not capped
    # a value of a type the writer refuses is not counted (the write fails, with Spark's
    # message); no key: the values only
    wrong = df.selectExpr("key", "n AS value")
    assert KafkaSink("h:1", "t", bytes_per_transaction=49).partitions_for(wrong) == 2
    assert KafkaSink("h:1", "t", bytes_per_transaction=50).partitions_for(wrong) == 1
    values = df.select("value")
    assert KafkaSink("h:1", "t", bytes_per_transaction=95).partitions_for(values) == 2
    assert KafkaSink("h:1", "t", bytes_per_transaction=190).partitions_for(values) == 1
