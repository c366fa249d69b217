"""A disk broker's restart opens every topic's logs in one batch (#30): one pool of
threads and one sync of the file system for all, however many topics hold them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import kafkette.backends.disk.log as disk_log
from kafkette.backends import Log, LogConfig
from kafkette.backends.disk import DiskStorage
from kafkette.server import Broker, BrokerConfig
from tests.backends.helpers import simple_batch

SIZES = {"a": 1, "b": 3, "c": 1, "d": 2}


def test_a_restart_opens_every_topics_logs_in_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    for name, count in SIZES.items():
        topic = broker.cluster.create_topic(name, count)
        assert topic is not None
        for partition in topic.partitions:
            for _ in range(partition.index + 1):
                partition.log.append(simple_batch(2))
    broker.cluster.write_topics_now()
    broker.close()

    batches: list[list[tuple[str, int]]] = []
    real_open_many = DiskStorage.open_many
    directory_syncs: list[str] = []

    def open_many(
        self: DiskStorage, wanted: Sequence[tuple[str, int, LogConfig | None]]
    ) -> list[Log]:
        batches.append([(t, p) for t, p, _ in wanted])
        return real_open_many(self, wanted)

    monkeypatch.setattr(DiskStorage, "open_many", open_many)
    monkeypatch.setattr(disk_log, "fsync_dir", directory_syncs.append)
    reopened = Broker(BrokerConfig(data_dir=str(tmp_path)))
    try:
        assert batches == [[(n, p) for n, count in SIZES.items() for p in range(count)]]
        assert directory_syncs == []  # the markers' removal: one syncfs for all
        assert {
            name: [(p.log.topic, p.log.partition, p.log.log_end_offset) for p in t.partitions]
            for name, t in reopened.cluster.topics.items()
        } == {name: [(name, p, 2 * (p + 1)) for p in range(c)] for name, c in SIZES.items()}
    finally:
        reopened.close()
