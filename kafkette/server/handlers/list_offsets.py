"""ListOffsets (key 2): earliest, latest, by timestamp, max timestamp."""

from __future__ import annotations
