"""Client metrics subscriptions are kept in the data directory, as Kafka keeps them in its
metadata: a disk broker restarted still asks its clients for the same metrics."""

from __future__ import annotations

from pathlib import Path

from kafkette import AdminClient
from kafkette.admin import AlterConfigOp, AlterOp, ConfigResource, ConfigSource, ResourceType
from kafkette.client.inprocess import close_cluster, get_cluster

SUBSCRIPTION = ConfigResource(ResourceType.CLIENT_METRICS, "latency")


def describe(url: str) -> dict[str, tuple[str | None, ConfigSource]]:
    with AdminClient(bootstrap_servers=url) as admin:
        entries = admin.describe_configs([SUBSCRIPTION]).all()[SUBSCRIPTION]
    return {name: (entry.value, entry.source) for name, entry in entries.items()}


def test_a_restarted_disk_broker_keeps_its_subscriptions(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    get_cluster(url)
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            changes = [
                AlterConfigOp("metrics", "org.apache.kafka."),
                AlterConfigOp("interval.ms", "500"),
            ]
            admin.incremental_alter_configs({SUBSCRIPTION: changes}).all()
            gone = ConfigResource(ResourceType.CLIENT_METRICS, "gone")
            admin.incremental_alter_configs({gone: [AlterConfigOp("metrics", "x.")]}).all()
            admin.incremental_alter_configs(
                {gone: [AlterConfigOp("metrics", op=AlterOp.DELETE)]}
            ).all()
    finally:
        close_cluster(url)
    restarted = get_cluster(url)
    try:
        assert describe(url) == {
            "interval.ms": ("500", ConfigSource.CLIENT_METRICS_CONFIG),
            "match": ("", ConfigSource.DEFAULT_CONFIG),
            "metrics": ("org.apache.kafka.", ConfigSource.CLIENT_METRICS_CONFIG),
        }
        manager = restarted.broker.metrics.client_metrics
        assert sorted(manager.subscriptions) == ["latency"]
        assert manager.subscriptions["latency"].metrics == ("org.apache.kafka.",)
    finally:
        close_cluster(url)
