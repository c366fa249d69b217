"""``kafkette topics list|describe|create|delete|alter|add-partitions``.

``describe`` shows each partition's leader, replicas, in-sync replicas and its
earliest and latest offsets, then the topic configs that differ from the
defaults (those whose source is not the default).
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import (
    AlterConfigOp,
    AlterOp,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    parse_setting,
    print_json,
    print_rows,
    table,
    write,
)
from kafkette.errors import TopicAlreadyExistsError
from kafkette.structs import TopicPartition


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("topics", help="list, describe, create, delete and alter topics")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="topics and their partition counts")
    listing.add_argument("--internal", action="store_true", help="include internal topics")
    listing.set_defaults(run=list_topics)

    describe = actions.add_parser("describe", help="partitions, offsets and configs")
    describe.add_argument("topics", nargs="+", metavar="TOPIC")
    describe.set_defaults(run=describe_topics)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="(default: the broker's)")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="(default: the broker's)"
    )
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    create.set_defaults(run=create_topic)

    delete = actions.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.set_defaults(run=delete_topics)

    alter = actions.add_parser("alter", help="set or remove topic configs")
    alter.add_argument("topic")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY")
    alter.set_defaults(run=alter_topic)

    grow = actions.add_parser("add-partitions", help="raise a topic's partition count")
    grow.add_argument("topic")
    grow.add_argument("--partitions", type=int, required=True, help="the new total count")
    grow.set_defaults(run=add_partitions)

    for action in (listing, describe, create, delete, alter, grow):
        add_common_arguments(action)


def admin_for(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_settings(args, "admin"))


def list_topics(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        names = sorted(admin.list_topics(include_internal=args.internal))
        described = admin.describe_topics(names).all() if names else {}
    print_rows(args, ("topic", "partitions"), [(n, len(described[n].partitions)) for n in names])
    return 0


def describe_topics(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        described = admin.describe_topics(args.topics).all()
        tps = [
            TopicPartition(name, p.partition)
            for name in args.topics
            for p in described[name].partitions
        ]
        earliest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST)).all()
        latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST)).all()
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in args.topics]
        configs = admin.describe_configs(resources).all()
    partition_rows: list[tuple[Any, ...]] = []
    for name in args.topics:
        for p in described[name].partitions:
            tp = TopicPartition(name, p.partition)
            partition_rows.append(
                (
                    name,
                    p.partition,
                    p.leader.id if p.leader else None,
                    [n.id for n in p.replicas],
                    [n.id for n in p.isr],
                    earliest[tp].offset,
                    latest[tp].offset,
                )
            )
    config_rows = [
        (
            resource.name,
            entry.name,
            "******" if entry.is_sensitive else entry.value,
            entry.source.name,
        )
        for resource in resources
        for entry in sorted(configs[resource].values(), key=lambda e: e.name)
        if not entry.is_default
    ]
    partition_columns = ("topic", "partition", "leader", "replicas", "isr", "earliest", "latest")
    config_columns = ("topic", "config", "value", "source")
    if args.json:
        print_json(
            [
                {
                    "topic": name,
                    "topic_id": str(described[name].topic_id),
                    "internal": described[name].is_internal,
                    "partitions": [
                        dict(zip(partition_columns[1:], row[1:], strict=True))
                        for row in partition_rows
                        if row[0] == name
                    ],
                    "configs": {row[1]: row[2] for row in config_rows if row[0] == name},
                }
                for name in args.topics
            ]
        )
        return 0
    out = table(partition_columns, partition_rows)
    if config_rows:
        out += "\n" + table(config_columns, config_rows)
    write(out)
    return 0


def parse_configs(texts: list[str]) -> dict[str, str]:
    return dict(parse_setting(text, "--config") for text in texts)


def create_topic(args: argparse.Namespace) -> int:
    new = NewTopic(args.topic, args.partitions, args.replication_factor, parse_configs(args.config))
    with admin_for(args) as admin:
        try:
            created = admin.create_topics([new]).all()[args.topic]
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
            report(args, {"topic": args.topic, "created": False}, f"topic {args.topic} exists")
            return 0
    report(
        args,
        {"topic": args.topic, "created": True, "partitions": created.num_partitions},
        f"created topic {args.topic} with {created.num_partitions} partitions",
    )
    return 0


def delete_topics(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        admin.delete_topics(args.topics).all()
    report(args, {"deleted": args.topics}, "".join(f"deleted topic {t}\n" for t in args.topics))
    return 0


def alter_topic(args: argparse.Namespace) -> int:
    ops = [AlterConfigOp(k, v, AlterOp.SET) for k, v in parse_configs(args.config).items()]
    ops += [AlterConfigOp(name, None, AlterOp.DELETE) for name in args.delete_config]
    if not ops:
        raise UsageError("nothing to change: give --config KEY=VALUE or --delete-config KEY")
    resource = ConfigResource(ResourceType.TOPIC, args.topic)
    with admin_for(args) as admin:
        admin.incremental_alter_configs({resource: ops}).all()
    changes = [
        f"set {op.name}={op.value}" if op.op == AlterOp.SET else f"removed {op.name}" for op in ops
    ]
    report(
        args,
        {"topic": args.topic, "changes": changes},
        f"altered topic {args.topic}: {', '.join(changes)}",
    )
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        admin.create_partitions({args.topic: NewPartitions(args.partitions)}).all()
    report(
        args,
        {"topic": args.topic, "partitions": args.partitions},
        f"topic {args.topic} now has {args.partitions} partitions",
    )
    return 0


def report(args: argparse.Namespace, value: dict[str, Any], message: str) -> None:
    """The outcome of a change: ``value`` as JSON, or ``message`` for people."""
    if args.json:
        print_json(value)
    else:
        write(message if message.endswith("\n") else message + "\n")
