"""The disk backend: segment files, indexes, checkpoints and recovery."""

from kafkette.backends.disk.log import DiskLog
from kafkette.backends.disk.storage import DiskStorage

__all__ = ["DiskLog", "DiskStorage"]
