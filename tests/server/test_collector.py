"""A served broker's garbage collector policy (#30): what it freezes, and that freezing
leaks nothing a deleted topic held."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.server import Broker, BrokerConfig
from kafkette.server import collector as collector_module
from kafkette.server.collector import ServedCollector
from tests.server.dataplane import batch


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("on_disk", [True, False], ids=["disk", "memory"])
def test_a_deleted_topics_partitions_are_freed_without_the_collector(
    tmp_path: Path, on_disk: bool, collector_off: None
) -> None:
    # Freezing is safe only if a partition's objects hold no reference cycle: reference
    # counting alone must free them when their topic is deleted.
    broker = Broker(BrokerConfig(data_dir=str(tmp_path) if on_disk else None))
    cluster = broker.cluster
    cluster.create_topic("t", 3)
    refs = []
    for partition in cluster.get_topic("t").partitions:
        partition.log.append(batch([(b"k", b"v")]))
        refs += [weakref.ref(partition), weakref.ref(partition.log)]
    del partition
    cluster.delete_topic("t")
    cluster.storage.reap()
    assert [ref() for ref in refs] == [None] * 6
    broker.close()


def test_partitions_opened_in_bulk_are_frozen(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    collector = ServedCollector(freeze_every=10)
    broker.cluster.collector = collector
    try:
        collector.install()
        assert collector.freezes == 1
        frozen = gc.get_freeze_count()
        broker.cluster.create_topic("t", 25)
        assert collector.freezes == 3  # after the 10th and the 20th partition
        assert gc.get_freeze_count() > frozen
        broker.cluster.add_partitions("t", 30)
        assert collector.freezes == 4  # the 5 left over and these 5
    finally:
        collector.uninstall()
        gc.unfreeze()
        broker.close()


def test_a_slow_collection_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(collector_module, "SLOW_COLLECTION_S", 0.0)
    collector = ServedCollector()
    gc.callbacks.append(collector._on_collection)
    try:
        with caplog.at_level(logging.WARNING, "kafkette.server.collector"):
            gc.collect(2)
    finally:
        collector.uninstall()
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("garbage collection of generation 2 took ") for m in said), said
