"""``kafkette cluster``: the cluster id, the controller, the brokers and the API
versions the broker answering supports (with the range kafkette speaks)."""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from kafkette.admin.sync_client import AdminClient
from kafkette.cli.common import (
    Subcommands,
    add_common_arguments,
    client_settings,
    print_json,
    table,
    write,
)
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.protocol.messages import REQUESTS

BROKER_COLUMNS = ("id", "host", "port", "rack")


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("cluster", help="brokers, controller, cluster id, API versions")
    add_common_arguments(parser)
    parser.set_defaults(run=run)


async def broker_versions(settings: dict[str, Any]) -> tuple[int, dict[int, tuple[int, int]]]:
    """The node that answered and the (min, max) version of each API it supports."""
    async with KafkaClient(AdminConfig.from_user(settings)) as client:
        node = await client.any_node()
        connection = await client.connection(node)
        return node, dict(connection.broker_versions)


def api_name(key: int) -> tuple[str, str]:
    """The API's name and the versions kafkette speaks (``-`` for an API it does not know)."""
    try:
        request = REQUESTS[key]
    except KeyError:
        return f"Unknown{key}", "-"
    low, high = request.VALID_VERSIONS
    return request.NAME.removesuffix("Request"), f"{low}-{high}"


def run(args: argparse.Namespace) -> int:
    settings = client_settings(args, "admin")
    with AdminClient(settings) as admin:
        cluster = admin.describe_cluster()
    node, versions = anyio.run(broker_versions, settings)
    brokers = [(n.id, n.host, n.port, n.rack) for n in sorted(cluster.nodes, key=lambda n: n.id)]
    controller = cluster.controller.id if cluster.controller else None
    apis = [(*api_name(key), key, low, high) for key, (low, high) in sorted(versions.items())]
    if args.json:
        print_json(
            {
                "cluster_id": cluster.cluster_id,
                "controller": controller,
                "brokers": [
                    dict(zip(("id", "host", "port", "rack"), b, strict=True)) for b in brokers
                ],
                "api_versions": {
                    "node": node,
                    "apis": [
                        {"api": name, "key": key, "min": low, "max": high, "kafkette": ours}
                        for name, ours, key, low, high in apis
                    ],
                },
            }
        )
        return 0
    write(
        table(("cluster_id", "controller"), [(cluster.cluster_id, controller)])
        + "\n"
        + table(("broker", *BROKER_COLUMNS[1:]), brokers)
        + "\n"
        + table(
            ("api", "key", "min", "max", "kafkette"),
            [(name, key, low, high, ours) for name, ours, key, low, high in apis],
        )
    )
    return 0
