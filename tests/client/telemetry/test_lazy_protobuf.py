"""A client whose broker asks for no metrics never loads protobuf: OTLP's generated
classes are imported by the first push only (a client with a subscription does load them)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import time
from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType
from kafkette.testing import MemoryCluster

with MemoryCluster() as cluster:
    url = cluster.bootstrap_servers
    if sys.argv[1] == "subscribed":
        with AdminClient(bootstrap_servers=url) as admin:
            resource = ConfigResource(ResourceType.CLIENT_METRICS, "all")
            admin.incremental_alter_configs({resource: [AlterConfigOp("metrics", "*")]}).all()
    with Producer(bootstrap_servers=url) as producer:
        producer.send("t", b"v", partition=0)
        producer.flush()
        telemetry = producer._core.client.telemetry
        deadline = time.monotonic() + 10  # the subscription's answer (one round trip)
        while telemetry.machine.subscription is None and time.monotonic() < deadline:
            time.sleep(0.01)
        asked = telemetry.requests_sent
    with Consumer(bootstrap_servers=url, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("t", 0)])
        for _ in range(10):
            if consumer.poll(timeout_ms=1000):
                break
        else:
            raise AssertionError("the consumer read nothing in 10 polls")
print(asked >= 1, sorted({m.split(".")[0] for m in sys.modules} & {"google", "opentelemetry"}))
"""


def run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_clients_without_a_subscription_import_no_protobuf() -> None:
    assert run("unsubscribed") == "True []"


def test_a_subscribed_client_pushes_with_protobuf() -> None:
    assert run("subscribed") == "True ['google', 'opentelemetry']"
