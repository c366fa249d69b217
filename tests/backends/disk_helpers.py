"""Inspecting DiskLog directories in tests."""

from __future__ import annotations

import os
import shutil
import tempfile

from kafkette.backends.disk.log import DiskLog
from kafkette.backends.disk.segment import FileSegment


def index_snapshot(log: DiskLog) -> list[tuple[int, list[tuple[int, int]], list[tuple[int, int]]]]:
    """(base offset, offset index entries, time index entries) of every segment."""
    result = []
    for segment in log.segments:
        assert isinstance(segment, FileSegment)
        result.append((segment.base_offset, segment.index.entries(), segment.time_index.entries()))
    return result


def rebuilt_index_snapshot(
    log: DiskLog,
) -> list[tuple[int, list[tuple[int, int]], list[tuple[int, int]]]]:
    """What :func:`index_snapshot` gives for indexes rebuilt from a copy of the log files."""
    interval = log.config.index_interval_bytes
    result = []
    with tempfile.TemporaryDirectory() as scratch:
        segments = log.segments
        for i, segment in enumerate(segments):
            assert isinstance(segment, FileSegment)
            shutil.copy(segment.log_path, scratch)
            copy = FileSegment(
                scratch, segment.base_offset, index_interval=interval, max_index_bytes=1 << 30
            )
            copy.rebuild_indexes(sealed=i < len(segments) - 1)
            result.append((copy.base_offset, copy.index.entries(), copy.time_index.entries()))
            copy.close()
    return result


def segment_files(directory: str) -> list[str]:
    return sorted(os.listdir(directory))
