"""The broker settings of consumer-type groups (KIP-848), with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kafkette.errors import ConfigError

UNIFORM = "uniform"
RANGE = "range"
KNOWN_ASSIGNORS = (UNIFORM, RANGE)

_JAVA_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}

MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""``group.consumer.migration.policy``'s values (Kafka's ConsumerGroupMigrationPolicy)."""

MAX_GROUP_SIZE = 2**31 - 1
"""``group.consumer.max.size``'s default: Kafka's Integer.MAX_VALUE (no limit)."""


@attrs.frozen(kw_only=True)
class ConsumerGroupConfig:
    """``group.consumer.*``: how the coordinator runs groups of the consumer protocol."""

    session_timeout_ms: int = 45_000
    """``group.consumer.session.timeout.ms``."""
    heartbeat_interval_ms: int = 5_000
    """``group.consumer.heartbeat.interval.ms``, given to members in every response."""
    max_size: int = MAX_GROUP_SIZE
    """``group.consumer.max.size``: members beyond it get GROUP_MAX_SIZE_REACHED."""
    assignors: tuple[str, ...] = KNOWN_ASSIGNORS
    """``group.consumer.assignors``: the server assignors; the first is the default."""
    migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy``: whether a classic group with members is
    converted when a consumer-protocol member joins (upgrade), and a consumer group back
    to classic when its last consumer-protocol member leaves (downgrade)."""
    classic_max_size: int = MAX_GROUP_SIZE
    """``group.max.size``: a consumer group larger than this is not downgraded."""

    @property
    def upgrade_enabled(self) -> bool:
        """Whether a classic group may be converted into a consumer group."""
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """Whether a consumer group may be converted back into a classic group."""
        return self.migration_policy in ("bidirectional", "downgrade")

    def __attrs_post_init__(self) -> None:
        if self.session_timeout_ms <= 0:
            raise ConfigError(
                "group.consumer.session.timeout.ms",
                f"must be positive, got {self.session_timeout_ms}",
            )
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms",
                "must be positive and below group.consumer.session.timeout.ms "
                f"({self.session_timeout_ms}), got {self.heartbeat_interval_ms}",
            )
        if self.max_size < 1:
            raise ConfigError("group.consumer.max.size", f"must be at least 1, got {self.max_size}")
        if not self.assignors:
            raise ConfigError("group.consumer.assignors", "must name at least one assignor")
        for name in self.assignors:
            if name not in KNOWN_ASSIGNORS:
                raise ConfigError(
                    "group.consumer.assignors",
                    f"unknown assignor {name!r} (known: {', '.join(KNOWN_ASSIGNORS)})",
                )
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ConfigError(
                "group.consumer.migration.policy",
                f"must be one of {', '.join(MIGRATION_POLICIES)}, got {self.migration_policy!r}",
            )
        if len(set(self.assignors)) != len(self.assignors):
            raise ConfigError(
                "group.consumer.assignors", f"names an assignor twice: {self.assignors}"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ConsumerGroupConfig:
        """Read the ``group.consumer.*`` entries of broker properties (others are ignored).

        Assignors are given by name (``uniform``, ``range``) or by Kafka's class names."""

        def integer(name: str, default: int) -> int:
            raw = properties.get(name)
            if raw is None:
                return default
            try:
                return int(raw.strip())
            except ValueError:
                raise ConfigError(name, f"must be an integer, got {raw!r}") from None

        assignors: tuple[str, ...] = KNOWN_ASSIGNORS
        raw = properties.get("group.consumer.assignors")
        if raw is not None:
            names = [n.strip() for n in raw.split(",") if n.strip()]
            assignors = tuple(_JAVA_NAMES.get(n, n) for n in names)
        return cls(
            session_timeout_ms=integer("group.consumer.session.timeout.ms", 45_000),
            heartbeat_interval_ms=integer("group.consumer.heartbeat.interval.ms", 5_000),
            max_size=integer("group.consumer.max.size", MAX_GROUP_SIZE),
            assignors=assignors,
            migration_policy=properties.get("group.consumer.migration.policy", "bidirectional")
            .strip()
            .lower(),
            classic_max_size=integer("group.max.size", MAX_GROUP_SIZE),
        )
