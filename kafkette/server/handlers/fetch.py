"""Fetch (key 1): long polls, byte limits, offsets and stored batches."""

from __future__ import annotations
