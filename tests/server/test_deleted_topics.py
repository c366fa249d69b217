"""A deleted topic's logs on disk: renamed away at once, freed off the loop, and never
back after a crash (#30)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kafkette.backends.config import LogConfig
from kafkette.backends.disk.storage import DiskStorage
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.server import Broker, BrokerConfig


def _batch(values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(0, None, value)
    return builder.build()


def _deleted_fds(under: Path) -> list[str]:
    """This process's descriptors of files under ``under`` that have no name any more."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)) and target.endswith(" (deleted)"):
            found.append(target)
    return found


def test_a_topic_the_topics_file_no_longer_names_is_not_reopened(tmp_path: Path) -> None:
    """A crash after the topics file dropped a topic, before its logs went: the next
    start deletes them, and a new topic of that name starts empty."""
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    broker.cluster.create_topic("keep", 1)
    broker.cluster.create_topic("gone", 2)
    broker.cluster.get_partition("gone", 1).log.append(_batch([b"a", b"b", b"c"]))
    broker.close()
    topics_file = tmp_path / "kafkette-topics.json"
    saved = json.loads(topics_file.read_text())
    saved["topics"] = [t for t in saved["topics"] if t["name"] != "gone"]
    topics_file.write_text(json.dumps(saved))

    again = Broker(BrokerConfig(data_dir=str(tmp_path)))
    assert sorted(again.cluster.topics) == ["keep"]
    assert [n for n in os.listdir(tmp_path / "logs") if n.startswith("gone-")] != []
    again.cluster.create_topic("gone", 2)
    assert [again.cluster.get_partition("gone", i).log.log_end_offset for i in (0, 1)] == [0, 0]
    assert again.cluster.storage.reap() == 2
    assert sorted(os.listdir(tmp_path / "logs")) == ["gone-0", "gone-1", "keep-0"]
    again.close()


def test_deleting_renames_at_once_and_reap_frees(tmp_path: Path) -> None:
    """delete_log leaves ``<name>.<id>-delete`` for reap; one left by a crash is found
    when the storage opens."""
    storage = DiskStorage(str(tmp_path))
    storage.open_log("t", 0).append(_batch([b"x" * 1000]))
    storage.delete_log("t", 0)
    names = os.listdir(tmp_path)
    assert len(names) == 1 and names[0].startswith("t-0.") and names[0].endswith("-delete")
    assert storage.list_partitions() == []
    assert storage.open_log("t", 0).log_end_offset == 0  # a new log, not the old one
    storage.close()  # reaps what is left
    assert os.listdir(tmp_path) == ["t-0"]
    (tmp_path / "t-1.0123-delete").mkdir()
    (tmp_path / "t-1.0123-delete" / "00000000000000000000.log").write_bytes(b"x")
    again = DiskStorage(str(tmp_path))
    assert again.reap_pending and again.reap() == 1
    assert os.listdir(tmp_path) == ["t-0"]
    again.close()


def test_retention_leaves_the_deleted_segments_descriptor_to_reap(tmp_path: Path) -> None:
    """The last close of a deleted segment file (which frees its blocks) happens in
    reap, not where retention deleted it."""
    storage = DiskStorage(str(tmp_path))

    log = storage.open_log("t", 0, LogConfig(segment_bytes=2000, retention_bytes=0))
    for _ in range(3):
        log.append(_batch([b"x" * 1500]))
    log.update_high_watermark(log.log_end_offset)
    assert _deleted_fds(tmp_path) == []
    assert log.enforce_retention() == 2
    assert len(_deleted_fds(tmp_path)) == 2
    assert log.log_start_offset == 2
    assert storage.reap() == 2
    assert _deleted_fds(tmp_path) == []
    storage.close()
