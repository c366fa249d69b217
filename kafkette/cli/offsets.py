"""``kafkette offsets TOPIC``: earliest and latest offsets per partition, and with
``--time`` (column ``at_time``) the first offset of a record at or after that
time (-1 when there is none)."""

from __future__ import annotations

import argparse
from typing import Any

from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import OffsetSpec
from kafkette.cli.common import Subcommands, add_common_arguments, client_settings, print_rows
from kafkette.cli.consume import parse_time
from kafkette.structs import TopicPartition


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("offsets", help="earliest, latest and timed offsets of a topic")
    parser.add_argument("topic")
    parser.add_argument("--time", help="epoch milliseconds or ISO 8601 (UTC without a zone)")
    parser.add_argument(
        "--isolation",
        choices=("read_uncommitted", "read_committed"),
        help="read_committed: latest is the last stable offset",
    )
    add_common_arguments(parser)
    parser.set_defaults(run=run)


def parse_timestamp(text: str) -> int:
    return int(text) if text.isdigit() else parse_time(text, "--time")


def run(args: argparse.Namespace) -> int:
    when = None if args.time is None else parse_timestamp(args.time)
    isolation = args.isolation or "read_uncommitted"
    with AdminClient(client_settings(args, "admin")) as admin:
        described = admin.describe_topics([args.topic]).all()[args.topic]
        tps = [TopicPartition(args.topic, p.partition) for p in described.partitions]

        def lookup(spec: int) -> dict[TopicPartition, int]:
            found = admin.list_offsets(dict.fromkeys(tps, spec), isolation_level=isolation).all()
            return {tp: info.offset for tp, info in found.items()}

        earliest = lookup(OffsetSpec.EARLIEST)
        latest = lookup(OffsetSpec.LATEST)
        timed = lookup(when) if when is not None else {}
    columns: tuple[str, ...] = ("topic", "partition", "earliest", "latest")
    rows: list[tuple[Any, ...]] = []
    for tp in sorted(tps):
        row: tuple[Any, ...] = (tp.topic, tp.partition, earliest[tp], latest[tp])
        rows.append(row + ((timed[tp],) if when is not None else ()))
    if when is not None:
        columns += ("at_time",)
    print_rows(args, columns, rows)
    return 0
