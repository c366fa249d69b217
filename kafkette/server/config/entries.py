"""Configuration entries as DescribeConfigs (and CreateTopics v5+) report them.

A value's source and synonyms follow Kafka's rules
(``ConfigHelper.createTopicConfigEntry``/``createBrokerConfigEntry``): a
topic override comes first (DYNAMIC_TOPIC_CONFIG); then, for the broker
properties that are the configuration's default, every level that sets one
of them, highest first: this broker's dynamic configs, the cluster-wide
dynamic default, the static configuration, Kafka's default. Entries before
the first one named as the primary property are dropped, as Kafka does, so
``retention.ms`` left at its default has no synonym (Kafka's default sits on
``log.retention.hours``, not on ``log.retention.ms``) and its source is
DEFAULT_CONFIG, while ``cleanup.policy`` has ``log.cleanup.policy`` (DEFAULT_CONFIG).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kafkette.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from kafkette.server.config.catalog import (
    ALL_BROKER_CONFIGS,
    SYNONYM_OF,
    TOPIC_CONFIGS,
    ConfigSource,
    broker_config,
    validate_topic_configs,
)

if TYPE_CHECKING:
    from kafkette.server.cluster import Cluster

_KAFKA_DEFAULTS: dict[str, str] = {
    name: d.default for name, d in ALL_BROKER_CONFIGS.items() if d.default is not None
}


def _levels(
    cluster: Cluster, static_configs: Mapping[str, str], *, per_broker: bool = True
) -> list[tuple[Mapping[str, str], int]]:
    levels: list[tuple[Mapping[str, str], int]] = []
    if per_broker:
        levels.append((cluster.dynamic_broker_configs, ConfigSource.DYNAMIC_BROKER_CONFIG))
    levels.append((cluster.dynamic_default_configs, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    levels.append((static_configs, ConfigSource.STATIC_BROKER_CONFIG))
    levels.append((_KAFKA_DEFAULTS, ConfigSource.DEFAULT_CONFIG))
    return levels


def _synonyms(
    cluster: Cluster,
    static_configs: Mapping[str, str],
    primary: str,
    family: Iterable[str],
    *,
    per_broker: bool = True,
) -> list[DescribeConfigsSynonym]:
    names = list(family)
    found = [
        DescribeConfigsSynonym(name=name, value=values[name], source=int(source))
        for values, source in _levels(cluster, static_configs, per_broker=per_broker)
        for name in names
        if name in values
    ]
    while found and found[0].name != primary:
        found.pop(0)
    return found


def _family(name: str) -> list[str]:
    """Broker properties that are spellings of the same setting (log.retention.*)."""
    target = SYNONYM_OF.get(name)
    if target is None:
        return [name]
    return [s.name for s in TOPIC_CONFIGS[target[0]].synonyms]


def _entry(
    name: str,
    value: str | None,
    synonyms: list[DescribeConfigsSynonym],
    *,
    read_only: bool,
    config_type: int,
    doc: str,
    include_synonyms: bool,
    include_documentation: bool,
    legacy: bool,
    sensitive: bool = False,
) -> DescribeConfigsResourceResult:
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    if sensitive:
        value = None
        for synonym in synonyms:
            synonym.value = None
    return DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        is_default=legacy and source == ConfigSource.DEFAULT_CONFIG,
        config_source=int(source),
        is_sensitive=sensitive,
        synonyms=synonyms if include_synonyms else [],
        config_type=config_type,
        documentation=doc if include_documentation else None,
    )


def describe_topic_configs(
    cluster: Cluster,
    static_configs: Mapping[str, str],
    overrides: Mapping[str, str],
    *,
    keys: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    legacy: bool = False,
) -> list[DescribeConfigsResourceResult]:
    """Every configuration of a topic with these (valid) overrides, or those in ``keys``,
    in ``cluster`` (its dynamic broker configs and topic defaults) under a broker whose
    properties given explicitly are ``static_configs``.

    ``legacy`` (DescribeConfigs v0) fills ``is_default``.
    """
    wanted = set(keys) if keys else None
    effective = validate_topic_configs(overrides, base=cluster.defaults)[0].to_kafka()
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if wanted is not None and name not in wanted:
            continue
        primary = definition.synonyms[0].name if definition.synonyms else None
        synonyms = (
            _synonyms(cluster, static_configs, primary, _family(primary))
            if primary is not None
            else []
        )
        if name in overrides:
            value = overrides[name]
            synonyms.insert(
                0,
                DescribeConfigsSynonym(
                    name=name, value=value, source=int(ConfigSource.DYNAMIC_TOPIC_CONFIG)
                ),
            )
        elif name in effective:
            value = effective[name]
        else:
            value = _inert_default(cluster, static_configs, name)
        entries.append(
            _entry(
                name,
                value,
                synonyms,
                read_only=False,
                config_type=definition.type,
                doc=definition.doc,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
                legacy=legacy,
            )
        )
    return entries


def _inert_default(cluster: Cluster, static_configs: Mapping[str, str], name: str) -> str:
    definition = TOPIC_CONFIGS[name]
    for values, _ in _levels(cluster, static_configs)[:-1]:
        for synonym in definition.synonyms:
            if synonym.name in values:
                return values[synonym.name]
    return definition.default


def describe_broker_configs(
    cluster: Cluster,
    static_configs: Mapping[str, str],
    *,
    default_resource: bool = False,
    keys: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    legacy: bool = False,
) -> list[DescribeConfigsResourceResult]:
    """This broker's configuration, or (``default_resource``) the cluster-wide dynamic one:
    the dynamic configs of ``cluster`` over the properties given explicitly
    (``static_configs``) over Kafka's defaults.

    ``legacy`` (DescribeConfigs v0) fills ``is_default``, which later versions replace
    with the source.
    """
    wanted = set(keys) if keys else None
    if default_resource:
        names = sorted(cluster.dynamic_default_configs)
    else:
        # every non-internal config, and the listener-prefixed ones set dynamically
        names = sorted(
            {n for n, d in ALL_BROKER_CONFIGS.items() if not d.internal}
            | set(cluster.dynamic_broker_configs)
            | set(cluster.dynamic_default_configs)
        )
    entries = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        definition = broker_config(name)
        if definition is None:  # a name this catalog no longer knows, kept from an older run
            continue
        synonyms = _synonyms(
            cluster, static_configs, name, _family(name), per_broker=not default_resource
        )
        value = synonyms[0].value if synonyms and synonyms[0].name == name else None
        entries.append(
            _entry(
                name,
                value,
                synonyms,
                read_only=not definition.dynamic,
                config_type=definition.type,
                doc=definition.doc,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
                legacy=legacy,
                sensitive=definition.sensitive,
            )
        )
    return entries
