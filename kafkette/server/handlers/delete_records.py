"""DeleteRecords (key 21): move a partition's log start offset."""

from __future__ import annotations
