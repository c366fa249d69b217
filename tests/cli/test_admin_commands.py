"""``kafkette topics``, ``kafkette offsets`` and ``kafkette cluster`` against ``kafkette serve``."""

from __future__ import annotations

import json

import anyio

from kafkette import AdminClient, Producer
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok


def test_topics(memory_broker: BrokerProcess) -> None:
    broker = memory_broker

    def topics(*args: str) -> str:
        return ok(kafkette("topics", *args, bootstrap=broker.bootstrap))

    created = "--partitions 3 --config retention.ms=60000 --config cleanup.policy=compact"
    assert topics("create", "orders", *created.split()) == (
        "created topic orders with 3 partitions\n"
    )
    again = kafkette("topics", "create", "orders", bootstrap=broker.bootstrap)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (
        "kafkette topics create: TOPIC_ALREADY_EXISTS (36): Topic with this name already "
        "exists. (Topic 'orders' already exists.)\n"
    )
    assert topics("create", "orders", "--if-not-exists") == "topic orders exists\n"
    assert (
        topics("create", "audit", "--partitions", "1") == "created topic audit with 1 partitions\n"
    )
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        for i in range(5):
            producer.send("orders", b"x", key=b"k", partition=i % 2).result(10)
    assert topics(
        "alter", "orders", "--config", "retention.ms=120000", "--delete-config", "cleanup.policy"
    ) == ("altered topic orders: set retention.ms=120000, removed cleanup.policy\n")
    assert topics("add-partitions", "orders", "--partitions", "4") == (
        "topic orders now has 4 partitions\n"
    )
    assert topics("list") == "TOPIC   PARTITIONS\naudit   1\norders  4\n"
    assert topics("describe", "orders") == (
        "TOPIC   PARTITION  LEADER  REPLICAS  ISR  EARLIEST  LATEST\n"
        "orders  0          1       1         1    0         3\n"
        "orders  1          1       1         1    0         2\n"
        "orders  2          1       1         1    0         0\n"
        "orders  3          1       1         1    0         0\n"
        "\n"
        "TOPIC   CONFIG        VALUE   SOURCE\n"
        "orders  retention.ms  120000  DYNAMIC_TOPIC_CONFIG\n"
    )
    described = json.loads(topics("describe", "audit", "--json"))
    assert isinstance(described[0].pop("topic_id"), str)
    assert described == [
        {
            "topic": "audit",
            "internal": False,
            "partitions": [
                {
                    "partition": 0,
                    "leader": 1,
                    "replicas": [1],
                    "isr": [1],
                    "earliest": 0,
                    "latest": 0,
                }
            ],
            "configs": {},
        }
    ]
    assert json.loads(topics("list", "--json")) == [
        {"topic": "audit", "partitions": 1},
        {"topic": "orders", "partitions": 4},
    ]
    assert topics("delete", "audit", "orders") == "deleted topic audit\ndeleted topic orders\n"
    gone = kafkette("topics", "describe", "orders", bootstrap=broker.bootstrap)
    assert gone.returncode == 1
    assert gone.stderr.startswith("kafkette topics describe: UNKNOWN_TOPIC_OR_PARTITION (3)")


def test_offsets(timed: str) -> None:
    assert ok(kafkette("offsets", "timed", bootstrap=timed)) == (
        "TOPIC  PARTITION  EARLIEST  LATEST\n"
        "timed  0          0         5\n"
        "timed  1          0         3\n"
    )
    assert ok(kafkette("offsets", "timed", "--time", "2500", bootstrap=timed)) == (
        "TOPIC  PARTITION  EARLIEST  LATEST  AT_TIME\n"
        "timed  0          0         5       2\n"
        "timed  1          0         3       1\n"
    )
    later = ok(
        kafkette("offsets", "timed", "--time", "1970-01-01T00:00:04", "--json", bootstrap=timed)
    )
    assert json.loads(later) == [
        {"topic": "timed", "partition": 0, "earliest": 0, "latest": 5, "at_time": 3},
        {"topic": "timed", "partition": 1, "earliest": 0, "latest": 3, "at_time": -1},
    ]


async def _versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    async with KafkaClient(AdminConfig.from_user(bootstrap_servers=bootstrap)) as client:
        connection = await client.connection(await client.any_node())
        return dict(connection.broker_versions)


def test_cluster(memory_broker: BrokerProcess) -> None:
    with AdminClient(bootstrap_servers=memory_broker.bootstrap) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    assert cluster_id
    port = memory_broker.port
    out = ok(kafkette("cluster", bootstrap=memory_broker.bootstrap))
    head = (
        f"CLUSTER_ID{' ' * (len(cluster_id) - 8)}CONTROLLER\n"
        f"{cluster_id}  1\n"
        "\n"
        "BROKER  HOST       PORT   RACK\n"
        f"1       127.0.0.1  {port}  -\n"
        "\n"
    )
    assert out.startswith(head)
    apis = out[len(head) :].splitlines()
    versions = anyio.run(_versions, memory_broker.bootstrap)
    assert apis[0].split() == ["API", "KEY", "MIN", "MAX", "KAFKETTE"]
    assert len(apis) == 1 + len(versions)
    low, high = versions[0]
    assert apis[1].split() == ["Produce", "0", str(low), str(high), "0-11"]
    as_json = json.loads(ok(kafkette("cluster", "--json", bootstrap=memory_broker.bootstrap)))
    assert as_json["cluster_id"] == cluster_id
    assert as_json["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": port, "rack": None}]
    assert {a["key"]: (a["min"], a["max"]) for a in as_json["api_versions"]["apis"]} == versions
