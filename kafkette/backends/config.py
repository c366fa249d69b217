"""Per-partition log configuration: Kafka's topic settings and defaults.

:class:`LogConfig` holds the settings the storage backends act on, named after
Kafka's topic configuration with dots turned into underscores
(``segment.bytes`` is ``segment_bytes``). :meth:`LogConfig.from_kafka` builds
one from Kafka-style string properties, rejecting unknown names and invalid
values with :class:`~kafkette.backends.errors.InvalidConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kafkette.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
"""Kafka's ``Long.MAX_VALUE``: for ``flush.messages``/``flush.ms`` it means "leave it to the OS"."""

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

_POLICIES = frozenset({"delete", "compact"})
_COMPRESSION_TYPES = frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"})


def _policy(value: str) -> tuple[str, ...]:
    parts = tuple(sorted({p.strip() for p in value.split(",") if p.strip()}))
    if not parts or not set(parts) <= _POLICIES:
        raise ValueError(f"must be a list of 'delete' and 'compact', got {value!r}")
    return parts


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"must be true or false, got {value!r}")
    return lowered == "true"


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return parse


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value.strip())
        if number < low:
            raise ValueError(f"must be at least {low}, got {number}")
        return number

    return parse


def _ratio(value: str) -> float:
    number = float(value.strip())
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {number}")
    return number


_PARSERS: dict[str, Callable[[str], Any]] = {
    "segment.bytes": _int_at_least(14),
    "segment.ms": _int_at_least(1),
    "segment.jitter.ms": _int_at_least(0),
    "segment.index.bytes": _int_at_least(4),
    "index.interval.bytes": _int_at_least(0),
    "retention.ms": _int_at_least(-1),
    "retention.bytes": _int_at_least(-1),
    "cleanup.policy": _policy,
    "delete.retention.ms": _int_at_least(0),
    "min.compaction.lag.ms": _int_at_least(0),
    "max.compaction.lag.ms": _int_at_least(1),
    "min.cleanable.dirty.ratio": _ratio,
    "flush.messages": _int_at_least(1),
    "flush.ms": _int_at_least(0),
    "message.timestamp.type": _choice(CREATE_TIME, LOG_APPEND_TIME),
    "max.message.bytes": _int_at_least(0),
    "file.delete.delay.ms": _int_at_least(0),
    "preallocate": _bool,
    "compression.type": _choice(*sorted(_COMPRESSION_TYPES)),
    "min.insync.replicas": _int_at_least(1),
    "unclean.leader.election.enable": _bool,
    "message.timestamp.before.max.ms": _int_at_least(0),
    "message.timestamp.after.max.ms": _int_at_least(0),
    "message.timestamp.difference.max.ms": _int_at_least(0),
    "message.downconversion.enable": _bool,
}


@attrs.frozen(slots=True, kw_only=True)
class LogConfig:
    """Settings of one partition's log, with Kafka's defaults."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1048588
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_downconversion_enable: bool = True

    @property
    def compact(self) -> bool:
        """Whether the log is compacted (``compact`` or ``compact,delete``)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (``delete`` or ``compact,delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def names(cls) -> frozenset[str]:
        """The Kafka property names :meth:`from_kafka` accepts."""
        return frozenset(_PARSERS)

    @classmethod
    def from_kafka(
        cls, properties: Mapping[str, str], *, base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka topic properties, over ``base`` (or the defaults).

        Raises :class:`InvalidConfigError` naming the first unknown property
        or invalid value.
        """
        changes: dict[str, Any] = {}
        for name, raw in properties.items():
            parser = _PARSERS.get(name)
            if parser is None:
                raise InvalidConfigError(f"unknown topic configuration {name!r}")
            try:
                changes[name.replace(".", "_")] = parser(str(raw))
            except ValueError as exc:
                raise InvalidConfigError(f"invalid value for {name}: {exc}") from None
        return attrs.evolve(base if base is not None else cls(), **changes)

    def to_kafka(self) -> dict[str, str]:
        """The settings as Kafka property strings."""
        result: dict[str, str] = {}
        for name in _PARSERS:
            value = getattr(self, name.replace(".", "_"))
            if isinstance(value, bool):
                result[name] = "true" if value else "false"
            elif isinstance(value, tuple):
                result[name] = ",".join(value)
            else:
                result[name] = str(value)
        return result
