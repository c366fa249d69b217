"""Group configs: the settings one consumer group may override (config resource type 32,
Kafka's ``GroupConfig``), checked and described as Kafka does.

``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` (INT, at least 1)
override the broker's ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms`` for one group; the KIP-848 coordinator reads them
for that group's members. A change is checked on the group's whole set of overrides
(``GroupConfig.validate``): unknown names, values that are not INTs or below 1, values
outside the broker's ``group.consumer.min/max.*`` bounds, and a session timeout not above
the heartbeat interval (a name left unset counts with ``GroupConfig``'s own default, 45000
and 5000), each INVALID_CONFIG with Kafka's message. DescribeConfigs shows every name: an
override with source GROUP_CONFIG, else the broker's value with source DEFAULT_CONFIG, as
Kafka 4.0's ``ConfigHelper.createGroupConfigEntry``.

Kafka's share-group names (``share.*``) come with share groups, which this broker does not
serve yet: they are unknown names here.
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

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@attrs.frozen
class GroupConfigDef:
    """One group config: its Kafka default (for checks) and the broker setting it overrides."""

    name: str
    default: int
    broker_setting: str
    doc: str


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


def _parse_int(name: str, value: str) -> int:
    """Java's ``Integer.parseInt`` of the trimmed text, as ``ConfigDef`` parses an INT."""
    text = value.strip()
    number = int(text) if _JAVA_INT.fullmatch(text) else None
    if number is None or not _INT_MIN <= number <= _INT_MAX:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        )
    if number < 1:
        raise InvalidConfigError(
            f"Invalid value {number} for configuration {name}: Value must be at least 1"
        )
    return number


def validate_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """A group's whole set of overrides checked as Kafka's ``GroupConfig.validate``, in
    canonical form (what DescribeConfigs shows); raises INVALID_CONFIG saying why."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    parsed = {name: _parse_int(name, value) for name, value in configs.items()}
    values = {name: parsed.get(name, d.default) for name, d in GROUP_CONFIGS.items()}
    heartbeat, session = values[HEARTBEAT_INTERVAL], values[SESSION_TIMEOUT]
    bounds: Sequence[tuple[bool, str]] = (
        (
            heartbeat < broker.group_consumer_min_heartbeat_interval_ms,
            f"{HEARTBEAT_INTERVAL} must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            heartbeat > broker.group_consumer_max_heartbeat_interval_ms,
            f"{HEARTBEAT_INTERVAL} must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            session < broker.group_consumer_min_session_timeout_ms,
            f"{SESSION_TIMEOUT} must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            session > broker.group_consumer_max_session_timeout_ms,
            f"{SESSION_TIMEOUT} must be less than or equal to "
            "group.consumer.max.session.timeout.ms",
        ),
        (session <= heartbeat, f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"),
    )
    for failed, message in bounds:
        if failed:
            raise InvalidConfigError(message)
    return {name: str(number) for name, number in parsed.items()}


def _broker_value(broker: BrokerConfig, name: str) -> int:
    if name == SESSION_TIMEOUT:
        return broker.group_consumer_session_timeout_ms
    return broker.group_consumer_heartbeat_interval_ms


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
            value = str(_broker_value(broker, name))
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
                config_type=int(ConfigType.INT),
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries
