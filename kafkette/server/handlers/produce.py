"""Produce (key 0): validation, idempotence, acks 0/1/-1."""

from __future__ import annotations
