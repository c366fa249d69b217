"""DescribeConfigs entries of a CLIENT_METRICS resource (type 16): ``metrics``,
``interval.ms`` and ``match``, each its set value (source CLIENT_METRICS_CONFIG) or
Kafka's default (DEFAULT_CONFIG), as Kafka answers for any subscription name."""

from __future__ import annotations

from collections.abc import Sequence

from kafkette.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from kafkette.server.config.catalog import ConfigSource, ConfigType
from kafkette.server.metrics.client_metrics import (
    CONFIG_NAMES,
    INTERVAL_MS,
    INTERVAL_MS_DEFAULT,
    MATCH,
    METRICS,
    ClientMetricsManager,
)

CLIENT_METRICS = 16
"""The CLIENT_METRICS config resource type."""

_DEFINITIONS = (
    (
        INTERVAL_MS,
        str(INTERVAL_MS_DEFAULT),
        ConfigType.INT,
        "Metrics push interval in milliseconds",
    ),
    (MATCH, "", ConfigType.LIST, "Client match criteria"),
    (METRICS, "", ConfigType.LIST, "Telemetry metric name prefix list"),
)
LIST_CONFIGS = frozenset({METRICS, MATCH})
"""The configurations that are lists (IncrementalAlterConfigs APPEND and SUBTRACT them)."""
CLIENT_METRICS_CONFIGS = frozenset(CONFIG_NAMES)


def describe_client_metrics_configs(
    manager: ClientMetricsManager,
    name: str,
    *,
    keys: Sequence[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    """The entries of subscription ``name`` (``keys``: only those names; None: all)."""
    current = manager.configs(name)
    entries = []
    for config, default, kind, doc in _DEFINITIONS:
        if keys is not None and config not in keys:
            continue
        value = current.get(config)
        source = (
            ConfigSource.CLIENT_METRICS_CONFIG if value is not None else ConfigSource.DEFAULT_CONFIG
        )
        if value is None:
            value = default
        synonym = DescribeConfigsSynonym(name=config, value=value, source=int(source))
        entries.append(
            DescribeConfigsResourceResult(
                name=config,
                value=value,
                read_only=False,
                is_default=False,
                config_source=int(source),
                is_sensitive=False,
                synonyms=[synonym] if include_synonyms else [],
                config_type=int(kind),
                documentation=doc if include_documentation else None,
            )
        )
    return entries
