"""Group configs: the settings one group may override (config resource type 32, Kafka's
``GroupConfig``), checked and described as Kafka does.

Consumer groups (KIP-848): ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` override the broker's ``group.consumer.*`` ones for one
group. Share groups (KIP-932), Kafka 4.2's names: ``share.session.timeout.ms``,
``share.heartbeat.interval.ms``, ``share.record.lock.duration.ms`` (at least 1000),
``share.auto.offset.reset`` (``latest``, ``earliest`` or ``by_duration:<ISO-8601
duration>``: where a new share partition starts) and ``share.isolation.level``
(``read_uncommitted`` or ``read_committed``). The share coordinator reads them per group.

A change is checked on the group's whole set of overrides (``GroupConfig.validate``):
unknown names, INTs that do not parse or fall below their minimum, strings outside their
choices, values outside the broker's ``group.consumer.min/max.*`` and
``group.share.min/max.*`` bounds, and a session timeout not above its heartbeat interval
(a name left unset counts with ``GroupConfig``'s own default), each INVALID_CONFIG with
Kafka's message. DescribeConfigs shows every name: an override with source GROUP_CONFIG,
else the broker's value (or ``GroupConfig``'s default where no broker setting backs it)
with source DEFAULT_CONFIG, as Kafka's ``ConfigHelper.createGroupConfigEntry``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from kafkette.errors import InvalidConfigError, InvalidRequestError
from kafkette.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from kafkette.server.config.catalog import ConfigSource, ConfigType

if TYPE_CHECKING:
    from kafkette.server.config.broker_config import BrokerConfig

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

BY_DURATION = "by_duration:"
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@attrs.frozen
class GroupConfigDef:
    """One group config: its Kafka default (for checks) and the broker setting it overrides
    ("" when none backs it)."""

    name: str
    default: int | str
    broker_setting: str
    doc: str
    at_least: int = 1
    """An INT's minimum (``ConfigDef.Range.atLeast``)."""

    @property
    def config_type(self) -> ConfigType:
        """INT or STRING."""
        return ConfigType.INT if isinstance(self.default, int) else ConfigType.STRING


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            HEARTBEAT_INTERVAL,
            5_000,
            "group.consumer.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a consumer group.",
        ),
        GroupConfigDef(
            SESSION_TIMEOUT,
            45_000,
            "group.consumer.session.timeout.ms",
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            SHARE_AUTO_OFFSET_RESET,
            "latest",
            "",
            "The strategy to initialize the share-partition start offset: earliest, latest "
            "or by_duration:<ISO-8601 duration>.",
        ),
        GroupConfigDef(
            SHARE_HEARTBEAT_INTERVAL,
            5_000,
            "group.share.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            SHARE_ISOLATION_LEVEL,
            "read_uncommitted",
            "",
            "Controls how to read records written transactionally: read_committed delivers "
            "only committed transactional records, read_uncommitted all of them.",
        ),
        GroupConfigDef(
            SHARE_RECORD_LOCK_DURATION,
            30_000,
            "group.share.record.lock.duration.ms",
            "The record acquisition lock duration in milliseconds for share groups.",
            at_least=1000,
        ),
        GroupConfigDef(
            SHARE_SESSION_TIMEOUT,
            45_000,
            "group.share.session.timeout.ms",
            "The timeout to detect client failures when using the share group protocol.",
        ),
    )
}
"""Kafka's group configs this broker serves, sorted by name."""


def check_group_name(name: str, *, describing: bool) -> None:
    """The empty name is no group (Kafka's messages for DescribeConfigs and the alters)."""
    if not name:
        raise InvalidRequestError(
            "Group name must not be empty"
            if describing
            else "Default group resources are not allowed."
        )


def parse_iso_duration_ms(text: str) -> int | None:
    """Java's ``Duration.parse`` of ``text`` in milliseconds (None if it does not parse)."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or (match[3] is not None and match[3].upper() == "T"):
        return None
    if all(match[g] is None for g in (2, 4, 5, 6)):
        return None
    days, hours, minutes, seconds = (int(match[g] or 0) for g in (2, 4, 5, 6))
    fraction = (match[7] or "").ljust(9, "0")[:9]
    nanos = int(fraction) * (-1 if match[6] and match[6].startswith("-") else 1)
    total_ns = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 10**9 + nanos
    if match[1] == "-":
        total_ns = -total_ns
    return total_ns // 10**6


def auto_offset_reset_ms(value: str) -> int | None:
    """The duration of a ``by_duration:`` share.auto.offset.reset in ms, else None."""
    if value.startswith(BY_DURATION):
        return parse_iso_duration_ms(value[len(BY_DURATION) :])
    return None


def _check_string(definition: GroupConfigDef, value: str) -> str:
    """``ConfigDef``'s STRING: trimmed, then the name's validator."""
    text, name = value.strip(), definition.name
    if name == SHARE_ISOLATION_LEVEL:
        if text not in ("read_committed", "read_uncommitted"):
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: String must be one of: "
                "read_committed, read_uncommitted"
            )
    elif name == SHARE_AUTO_OFFSET_RESET and text not in ("earliest", "latest"):
        duration = auto_offset_reset_ms(text)
        if duration is None or duration < 0:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {name}: Invalid value `{text}` for "
                f"configuration {name}. The value must be either 'earliest', 'latest' or of "
                "the format 'by_duration:<PnDTnHnMn.nS.>'."
            )
    return text


def _parse_int(name: str, value: str, at_least: int = 1) -> int:
    """Java's ``Integer.parseInt`` of the trimmed text, as ``ConfigDef`` parses an INT."""
    text = value.strip()
    number = int(text) if _JAVA_INT.fullmatch(text) else None
    if number is None or not _INT_MIN <= number <= _INT_MAX:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        )
    if number < at_least:
        raise InvalidConfigError(
            f"Invalid value {number} for configuration {name}: Value must be at least {at_least}"
        )
    return number


def validate_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """A group's whole set of overrides checked as Kafka's ``GroupConfig.validate``, in
    canonical form (what DescribeConfigs shows); raises INVALID_CONFIG saying why."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    parsed: dict[str, int | str] = {}
    for name, value in configs.items():
        definition = GROUP_CONFIGS[name]
        if definition.config_type == ConfigType.INT:
            parsed[name] = _parse_int(name, value, definition.at_least)
        else:
            parsed[name] = _check_string(definition, value)
    ints = {
        name: int(parsed.get(name, d.default))
        for name, d in GROUP_CONFIGS.items()
        if d.config_type == ConfigType.INT
    }
    heartbeat, session = ints[HEARTBEAT_INTERVAL], ints[SESSION_TIMEOUT]
    share_heartbeat, share_session = ints[SHARE_HEARTBEAT_INTERVAL], ints[SHARE_SESSION_TIMEOUT]
    lock = ints[SHARE_RECORD_LOCK_DURATION]
    bounds: Sequence[tuple[bool, str]] = (
        *_range(heartbeat, HEARTBEAT_INTERVAL, "group.consumer", "heartbeat.interval.ms", broker),
        *_range(session, SESSION_TIMEOUT, "group.consumer", "session.timeout.ms", broker),
        *_range(
            share_heartbeat,
            SHARE_HEARTBEAT_INTERVAL,
            "group.share",
            "heartbeat.interval.ms",
            broker,
        ),
        *_range(share_session, SHARE_SESSION_TIMEOUT, "group.share", "session.timeout.ms", broker),
        *_range(lock, SHARE_RECORD_LOCK_DURATION, "group.share", "record.lock.duration.ms", broker),
        (session <= heartbeat, f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"),
        (
            share_session <= share_heartbeat,
            f"{SHARE_SESSION_TIMEOUT} must be greater than {SHARE_HEARTBEAT_INTERVAL}",
        ),
    )
    for failed, message in bounds:
        if failed:
            raise InvalidConfigError(message)
    return {name: str(value) for name, value in parsed.items()}


def _range(
    value: int, name: str, prefix: str, suffix: str, broker: BrokerConfig
) -> tuple[tuple[bool, str], tuple[bool, str]]:
    """The checks of ``value`` against the broker's ``{prefix}.min/max.{suffix}``."""
    low = int(getattr(broker, f"{prefix}.min.{suffix}".replace(".", "_")))
    high = int(getattr(broker, f"{prefix}.max.{suffix}".replace(".", "_")))
    return (
        (value < low, f"{name} must be greater than or equal to {prefix}.min.{suffix}"),
        (value > high, f"{name} must be less than or equal to {prefix}.max.{suffix}"),
    )


def _broker_value(broker: BrokerConfig, definition: GroupConfigDef) -> str:
    if not definition.broker_setting:
        return str(definition.default)
    return str(getattr(broker, definition.broker_setting.replace(".", "_")))


def group_value(overrides: Mapping[str, str], broker: BrokerConfig | None, name: str) -> str:
    """A group config's value for one group: its override, else the broker's (or
    ``GroupConfig``'s default when ``broker`` is None or no broker setting backs it)."""
    value = overrides.get(name)
    if value is not None:
        return value
    definition = GROUP_CONFIGS[name]
    return str(definition.default) if broker is None else _broker_value(broker, definition)


def describe_group_configs(
    overrides: Mapping[str, str],
    broker: BrokerConfig,
    *,
    keys: Sequence[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
    legacy: bool,
) -> list[DescribeConfigsResourceResult]:
    """The entries of one group's configs (``keys``: only those names; None: all)."""
    entries = []
    for name, definition in GROUP_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        value = overrides.get(name)
        source = ConfigSource.GROUP_CONFIG if value is not None else ConfigSource.DEFAULT_CONFIG
        if value is None:
            value = _broker_value(broker, definition)
        synonym = DescribeConfigsSynonym(name=name, value=value, source=int(source))
        entries.append(
            DescribeConfigsResourceResult(
                name=name,
                value=value,
                read_only=False,
                is_default=legacy and source == ConfigSource.DEFAULT_CONFIG,
                config_source=int(source),
                is_sensitive=False,
                synonyms=[synonym] if include_synonyms else [],
                config_type=int(definition.config_type),
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries
