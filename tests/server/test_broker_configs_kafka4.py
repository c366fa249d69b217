"""Every Kafka 4 broker config through DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

The table is kafkette/server/config/kafka_broker_configs.py (generated from Kafka's
sources by tools/kafka-broker-configs). In process: each dynamic name set on
broker "1" (per-broker ones) or on the cluster default "" (cluster-wide ones)
with a value of its type and described back exactly, listener-prefixed names,
every read-only name refused with Kafka's message, unknown names, bad values,
per-broker names at the default, and the values kept across a restart. Over
TCP: confluent-kafka against ``kafkette serve``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kafkette.server import Broker, BrokerConfig
from kafkette.server.config.catalog import (
    ALL_BROKER_CONFIGS,
    BROKER_CONFIGS,
    SYNONYM_OF,
    BrokerConfigDef,
    ConfigType,
)
from kafkette.server.config.kafka_broker_configs import ROWS, SSL_RECONFIGURABLE
from tests.brokers import BrokerProcess
from tests.server.test_configs import BROKER, SET, by_name, describe, incremental_alter

pytestmark = pytest.mark.anyio

DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5
INVALID_CONFIG, INVALID_REQUEST = 40, 42

KAFKA = {row[0]: row for row in ROWS}
_VALUES = {
    ConfigType.BOOLEAN: "true",
    ConfigType.STRING: "kafkette-test",
    ConfigType.INT: "7",
    ConfigType.SHORT: "3",
    ConfigType.LONG: "1234567",
    ConfigType.DOUBLE: "0.75",
    ConfigType.LIST: "a,b",
    ConfigType.CLASS: "com.example.Plugin",
    ConfigType.PASSWORD: "s3cret",
}


def value_for(definition: BrokerConfigDef) -> str:
    """A value of the config's type; a topic default keeps a value its topic config takes."""
    if definition.name in SYNONYM_OF and definition.default is not None:
        return {"compression.type": "gzip", "log.cleanup.policy": "compact"}.get(
            definition.name, definition.default
        )
    if definition.name == "max.connections.per.ip.overrides":  # parsed, as Kafka does
        return "127.0.0.1:100"
    return _VALUES[definition.type]


def dynamic(*, per_broker: bool) -> dict[str, BrokerConfigDef]:
    return {
        name: d
        for name, d in ALL_BROKER_CONFIGS.items()
        if d.dynamic and d.per_broker == per_broker and name not in SSL_RECONFIGURABLE
    }


def test_the_table_is_kafkas() -> None:
    """The generated table: Kafka's counts and a few well-known rows, exactly."""
    assert len(ROWS) == 318
    modes = [row[3] for row in ROWS]
    assert (modes.count("read-only"), modes.count("per-broker"), modes.count("cluster-wide")) == (
        225,
        37,
        56,
    )
    assert KAFKA["message.max.bytes"][:4] == ("message.max.bytes", "INT", "1048588", "cluster-wide")
    assert KAFKA["log.cleaner.threads"][:4] == ("log.cleaner.threads", "INT", "1", "cluster-wide")
    assert KAFKA["max.connections"][:4] == ("max.connections", "INT", "2147483647", "cluster-wide")
    assert KAFKA["sasl.kerberos.min.time.before.relogin"][:4] == (
        "sasl.kerberos.min.time.before.relogin",
        "LONG",
        "60000",
        "per-broker",
    )
    assert KAFKA["num.partitions"][:4] == ("num.partitions", "INT", "1", "read-only")
    assert KAFKA["ssl.keystore.password"][:4] == (
        "ssl.keystore.password",
        "PASSWORD",
        None,
        "per-broker",
    )
    assert "zookeeper.connect" not in KAFKA
    assert KAFKA["num.io.threads"][6] == ("at_least", "1")
    assert KAFKA["log.message.timestamp.type"][6] == ("one_of", "CreateTime", "LogAppendTime")


async def test_describe_lists_every_kafka_config_with_its_default() -> None:
    """Broker "1" lists every non-internal Kafka 4 config; ours keep our documented default."""
    configs = by_name(await describe(Broker(), BROKER, "1"))
    assert set(configs) == {row[0] for row in ROWS if not row[4]} | set(BROKER_CONFIGS)
    threads = configs["num.io.threads"]
    assert (threads.value, threads.config_source, threads.read_only, threads.config_type) == (
        "8",
        DEFAULT,
        False,
        ConfigType.INT,
    )
    assert "kafkette: accepted, stored and described; not acted upon" in threads.documentation
    # deliberately ours: 0 where Kafka has 3000 (Kafka's sample server.properties)
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    assert KAFKA["group.initial.rebalance.delay.ms"][2] == "3000"
    password = configs["ssl.keystore.password"]
    assert (password.value, password.is_sensitive, password.config_type) == (
        None,
        True,
        ConfigType.PASSWORD,
    )
    assert configs["node.id"].read_only


async def test_every_per_broker_name_on_broker_1() -> None:
    """Each per-broker dynamic name set on "1" is described back exactly (DYNAMIC_BROKER)."""
    broker = Broker()
    names = dynamic(per_broker=True)
    assert len(SSL_RECONFIGURABLE) == 10
    assert len(names) == 37 - 10
    ops = [(name, SET, value_for(d)) for name, d in names.items()]
    assert await incremental_alter(broker, BROKER, "1", ops) == (0, None)
    assert broker.cluster.dynamic_broker_configs == {n: v for n, _, v in ops}
    configs = by_name(await describe(broker, BROKER, "1"))
    for name, _, value in ops:
        entry = configs[name]
        expected = None if names[name].sensitive else value
        assert (entry.value, entry.config_source, entry.read_only) == (
            expected,
            DYNAMIC_BROKER,
            False,
        ), name
        assert entry.is_sensitive == names[name].sensitive


async def test_every_cluster_wide_name_on_the_default() -> None:
    """Each cluster-wide name set on "" is described back on "" and on "1" (DYNAMIC_DEFAULT)."""
    broker = Broker()
    broker.cluster.create_topic("t", 1)
    names = dynamic(per_broker=False)
    assert len(names) == 56
    ops = [(name, SET, value_for(d)) for name, d in names.items()]
    assert await incremental_alter(broker, BROKER, "", ops) == (0, None)
    default = by_name(await describe(broker, BROKER, ""))
    assert {n: (e.value, e.config_source) for n, e in default.items()} == {
        n: (v, DYNAMIC_DEFAULT) for n, _, v in ops
    }
    own = by_name(await describe(broker, BROKER, "1"))
    for name, _, value in ops:
        assert (own[name].value, own[name].config_source) == (value, DYNAMIC_DEFAULT), name
    # the implemented ones act: the topic takes the dynamic default
    log_config = broker.cluster.topics["t"].partitions[0].log.config
    assert (log_config.compression_type, log_config.cleanup_policy) == ("gzip", ("compact",))


async def test_ssl_configs_only_with_a_listener_prefix() -> None:
    """SSL keystore configs: refused bare, accepted per listener on "1", not at the default."""
    broker = Broker()
    assert await incremental_alter(broker, BROKER, "1", [("ssl.keystore.location", SET, "/k")]) == (
        INVALID_REQUEST,
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)",
    )
    prefixed = [
        ("listener.name.external.ssl.keystore.location", SET, "/k.jks"),
        ("listener.name.external.ssl.keystore.password", SET, "pw"),
        ("listener.name.external.scram-sha-512.sasl.jaas.config", SET, "jaas"),
        ("listener.name.external.max.connections", SET, "100"),
    ]
    assert await incremental_alter(broker, BROKER, "1", prefixed) == (0, None)
    configs = by_name(await describe(broker, BROKER, "1"))
    assert [
        (n, configs[n].value, configs[n].is_sensitive, configs[n].config_source)
        for n, _, _ in prefixed
    ] == [
        ("listener.name.external.ssl.keystore.location", "/k.jks", False, DYNAMIC_BROKER),
        ("listener.name.external.ssl.keystore.password", None, True, DYNAMIC_BROKER),
        ("listener.name.external.scram-sha-512.sasl.jaas.config", None, True, DYNAMIC_BROKER),
        ("listener.name.external.max.connections", "100", False, DYNAMIC_BROKER),
    ]
    at_default = [("listener.name.external.ssl.keystore.location", SET, "/k.jks")]
    assert await incremental_alter(broker, BROKER, "", at_default) == (
        INVALID_REQUEST,
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listener.name.external.ssl.keystore.location)",
    )
    cluster_level = [("listener.name.external.max.connections", SET, "5")]
    assert await incremental_alter(broker, BROKER, "", cluster_level) == (0, None)


async def test_every_read_only_name_is_refused() -> None:
    """Each read-only Kafka name (internal ones too) is INVALID_REQUEST with Kafka's message."""
    broker = Broker()
    read_only = [name for name, d in ALL_BROKER_CONFIGS.items() if not d.dynamic]
    assert len(read_only) == 225 + 2  # Kafka's, and the authorizer's two
    for name in read_only:
        for resource in ("1", ""):
            assert await incremental_alter(broker, BROKER, resource, [(name, SET, "1")]) == (
                INVALID_REQUEST,
                f"Cannot update these configs dynamically: Set({name})",
            ), name
    assert broker.cluster.dynamic_broker_configs == broker.cluster.dynamic_default_configs == {}


async def test_unknown_names_bad_values_and_per_broker_at_default() -> None:
    """Unknown names, values of the wrong type and per-broker names at "" change nothing."""
    broker = Broker()
    cases: list[tuple[str, str, str, tuple[int, str]]] = [
        (
            "1",
            "no.such.config",
            "1",
            (INVALID_CONFIG, "Unknown broker config name: no.such.config"),
        ),
        (
            "1",
            "listener.name.x.no.such",
            "1",
            (INVALID_CONFIG, "Unknown broker config name: listener.name.x.no.such"),
        ),
        (
            "1",
            "num.io.threads",
            "eight",
            (
                INVALID_REQUEST,
                "Invalid value eight for configuration num.io.threads: Not a number of type INT",
            ),
        ),
        (
            "",
            "log.cleaner.io.max.bytes.per.second",
            "fast",
            (
                INVALID_REQUEST,
                "Invalid value fast for configuration log.cleaner.io.max.bytes.per.second: "
                "Not a number of type DOUBLE",
            ),
        ),
        (
            "",
            "transaction.partition.verification.enable",
            "yes",
            (
                INVALID_REQUEST,
                "Invalid value yes for configuration transaction.partition.verification.enable: "
                "Expected value to be either true or false",
            ),
        ),
        (
            "",
            "sasl.kerberos.min.time.before.relogin",
            "1",
            (
                INVALID_REQUEST,
                "Cannot update these configs at default cluster level, broker id must be "
                "specified: Set(sasl.kerberos.min.time.before.relogin)",
            ),
        ),
    ]
    cases += [
        (
            "",
            "num.io.threads",
            "0",
            (
                INVALID_REQUEST,
                "Invalid value 0 for configuration num.io.threads: Value must be at least 1",
            ),
        ),
        (
            "1",
            "listener.name.external.max.connections",
            "-1",
            (
                INVALID_REQUEST,
                "Invalid value -1 for configuration listener.name.external.max.connections: "
                "Value must be at least 0",
            ),
        ),
    ]
    for resource, name, value, expected in cases:
        assert await incremental_alter(broker, BROKER, resource, [(name, SET, value)]) == expected
    assert broker.cluster.dynamic_broker_configs == broker.cluster.dynamic_default_configs == {}


async def test_dynamic_configs_survive_a_restart(tmp_path: Path) -> None:
    """Inert and applied dynamic configs are reopened from the data dir and described again."""
    data_dir = str(tmp_path)
    broker = Broker(BrokerConfig(data_dir=data_dir))
    per_broker = [
        ("sasl.kerberos.min.time.before.relogin", SET, "120000"),
        ("listener.name.external.ssl.key.password", SET, "pw"),
    ]
    default = [
        ("log.cleaner.threads", SET, "4"),
        ("message.max.bytes", SET, "2048"),
        ("max.connections", SET, "1000"),
    ]
    assert await incremental_alter(broker, BROKER, "1", per_broker) == (0, None)
    assert await incremental_alter(broker, BROKER, "", default) == (0, None)
    broker.close()

    reopened = Broker(BrokerConfig(data_dir=data_dir))
    try:
        configs = by_name(await describe(reopened, BROKER, "1"))
        assert [
            (n, configs[n].value, configs[n].config_source) for n, _, _ in per_broker + default
        ] == [
            ("sasl.kerberos.min.time.before.relogin", "120000", DYNAMIC_BROKER),
            ("listener.name.external.ssl.key.password", None, DYNAMIC_BROKER),
            ("log.cleaner.threads", "4", DYNAMIC_DEFAULT),
            ("message.max.bytes", "2048", DYNAMIC_DEFAULT),
            ("max.connections", "1000", DYNAMIC_DEFAULT),
        ]
        assert (
            reopened.cluster.dynamic_broker_configs["listener.name.external.ssl.key.password"]
            == "pw"
        )
        assert reopened.cluster.defaults.max_message_bytes == 2048
    finally:
        reopened.close()


def test_confluent_kafka_against_kafkette_serve(memory_broker: BrokerProcess) -> None:
    """confluent-kafka: message.max.bytes, log.cleaner.threads, max.connections and a Kerberos
    relogin time accepted where Kafka 4 accepts them, described back; read-only refused."""
    admin = AdminClient({"bootstrap.servers": memory_broker.bootstrap})

    def alter(name: str, entries: dict[str, str]) -> Any:
        resource = ConfigResource(
            ResourceType.BROKER,
            name,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in entries.items()
            ],
        )
        return admin.incremental_alter_configs([resource])[resource].result(10)

    # confluent-kafka cannot name the cluster default (an empty broker name is refused
    # locally), so the cluster-wide names go to broker 1, which Kafka allows too
    entries = {
        "message.max.bytes": "2000000",
        "sasl.kerberos.min.time.before.relogin": "90000",
        "log.cleaner.threads": "2",
        "max.connections": "500",
    }
    assert alter("1", entries) is None
    own = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([own])[own].result(10)
    assert [
        (n, configs[n].value, configs[n].source)
        for n in (
            "message.max.bytes",
            "sasl.kerberos.min.time.before.relogin",
            "log.cleaner.threads",
            "max.connections",
        )
    ] == [
        ("message.max.bytes", "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        (
            "sasl.kerberos.min.time.before.relogin",
            "90000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        ),
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("max.connections", "500", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
    ]
    assert configs["ssl.keystore.password"].is_sensitive
    with pytest.raises(KafkaException) as info:
        alter("1", {"log.dirs": "/elsewhere"})
    assert (info.value.args[0].code(), info.value.args[0].str()) == (
        INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(log.dirs)",
    )
