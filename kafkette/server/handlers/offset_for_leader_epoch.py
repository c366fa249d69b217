"""OffsetForLeaderEpoch (key 23)."""

from __future__ import annotations
