"""Fixtures for the Spark tests: one local Spark session and one broker for the whole run.

Spark's Python workers are separate processes, so these tests cannot use
``memory://``: they use ``kafkette serve`` on a loopback port. A local Spark
session takes seconds to start, so one is shared by every test; each test
uses topics of its own (``unique_topic``).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.brokers import BrokerProcess, kafkette_broker

_topic_numbers = itertools.count()


@pytest.fixture(scope="session")
def spark_broker() -> Iterator[BrokerProcess]:
    """``kafkette serve --memory`` for the whole Spark run."""
    yield from kafkette_broker(None)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` Spark session with the ``kafkette`` data source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkette-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from kafkette.spark_integration import register

    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test in this run uses."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"{stem}-{next(_topic_numbers)}"
