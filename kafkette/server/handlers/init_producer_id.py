"""InitProducerId (key 22) for idempotent producers."""

from __future__ import annotations
