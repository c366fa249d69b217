"""The broker's configuration: Kafka's property names, defaults and catalogue.

:mod:`~kafkette.server.config.broker_config` holds :class:`BrokerConfig` (what
the core acts on), :mod:`~kafkette.server.config.catalog` and
:mod:`~kafkette.server.config.entries` what DescribeConfigs and the Alter APIs
read and check, :mod:`~kafkette.server.config.kafka_broker_configs` the table
generated from Kafka's ConfigDefs, :mod:`~kafkette.server.config.listeners` the
``listeners`` and ``advertised.listeners`` properties,
:mod:`~kafkette.server.config.group_configs` the group configs (resource type 32).

Plain data and parsing, no I/O. May import ``backends``, ``protocol``,
``errors``, the core's leaves it parses for (``connection_quotas``), ``sasl``
(mechanism names) and the consumer-protocol group settings; never ``net``,
``handlers`` or a coordinator's state.
"""
