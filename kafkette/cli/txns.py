"""``kafkette txns list|describe ID...|abort`` and ``kafkette producers TOPIC``.

``txns list`` asks every broker for the transactional ids it coordinates
(ListTransactions), optionally only those in ``--state`` states, of
``--producer-id`` ids or open longer than ``--duration-ms``. ``txns describe``
asks each id's coordinator (DescribeTransactions) for its state, producer id and
epoch, timeout, when its last transaction started, how long the open one has
been open (``open_ms``, none once it ended) and its partitions. ``producers``
asks each partition's leader (DescribeProducers) for the producers it
remembers, with the first offset of an open transaction: the place to look for
a transaction that hangs.

``txns abort`` ends a hanging transaction in one partition as
``kafka-transactions.sh abort`` does: the partition's leader writes an ABORT
marker (WriteTxnMarkers) for the producer given by ``--producer-id``,
``--producer-epoch`` and ``--coordinator-epoch``, or for the producer whose
open transaction starts at ``--start-offset`` (found with DescribeProducers).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafkette.admin.sync_client import AdminClient
from kafkette.admin.txn_types import AbortTransactionSpec, TransactionState
from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    print_rows,
)
from kafkette.errors import KafkaError
from kafkette.structs import TopicPartition

STATES = [s.value for s in TransactionState if s is not TransactionState.UNKNOWN]
ENDED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
"""States without an open transaction: no ``open_ms``."""


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser("txns", help="list and describe transactions")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="transactional ids of every broker")
    listing.add_argument(
        "--state",
        dest="states",
        action="append",
        default=[],
        metavar="STATE",
        help=f"only ids in this state (repeatable): {', '.join(STATES)}",
    )
    listing.add_argument(
        "--producer-id",
        dest="producer_ids",
        action="append",
        default=[],
        type=int,
        metavar="ID",
        help="only this producer id (repeatable)",
    )
    listing.add_argument(
        "--duration-ms", type=int, metavar="MS", help="only transactions open longer than MS"
    )
    listing.set_defaults(run=list_transactions)

    describe = actions.add_parser("describe", help="state, producer and partitions of an id")
    describe.add_argument("transactional_ids", nargs="+", metavar="ID")
    describe.set_defaults(run=describe_transactions)

    abort = actions.add_parser(
        "abort", help="abort a hanging transaction in one partition (WriteTxnMarkers)"
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", required=True, type=int, metavar="N")
    abort.add_argument(
        "--start-offset",
        type=int,
        metavar="OFFSET",
        help="the producer whose open transaction starts at OFFSET (see kafkette producers)",
    )
    abort.add_argument("--producer-id", type=int, metavar="ID")
    abort.add_argument("--producer-epoch", type=int, metavar="EPOCH")
    abort.add_argument("--coordinator-epoch", type=int, metavar="EPOCH")
    abort.set_defaults(run=abort_transaction)

    producers = commands.add_parser(
        "producers", help="producers each partition's leader remembers (DescribeProducers)"
    )
    producers.add_argument("topic")
    producers.add_argument(
        "-p", dest="partitions", action="append", type=int, metavar="N", help="only partition N"
    )
    producers.set_defaults(run=describe_producers)

    for action in (listing, describe, abort, producers):
        add_common_arguments(action)


def admin_for(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_settings(args, "admin"))


def parse_state(text: str) -> TransactionState:
    state = TransactionState.parse(text)
    if state is TransactionState.UNKNOWN:
        raise UsageError(f"--state {text}: expected one of {', '.join(STATES)}")
    return state


def list_transactions(args: argparse.Namespace) -> int:
    states = [parse_state(s) for s in args.states]
    with admin_for(args) as admin:
        listings = admin.list_transactions(
            states=states or None,
            producer_ids=args.producer_ids or None,
            duration_ms=args.duration_ms,
        ).all()
    print_rows(
        args,
        ("transactional_id", "producer_id", "state", "coordinator"),
        [(t.transactional_id, t.producer_id, t.state.value, t.coordinator) for t in listings],
    )
    return 0


def describe_transactions(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        described = admin.describe_transactions(args.transactional_ids).all()
    now_ms = int(time.time() * 1000)
    rows: list[tuple[Any, ...]] = []
    for transactional_id, d in described.items():
        start = d.transaction_start_time_ms
        partitions = sorted(d.topic_partitions)
        rows.append(
            (
                transactional_id,
                d.coordinator_id,
                d.producer_id,
                d.producer_epoch,
                d.state.value,
                d.transaction_timeout_ms,
                start,
                None if start is None or d.state in ENDED else max(0, now_ms - start),
                [f"{tp.topic}-{tp.partition}" for tp in partitions],
            )
        )
    columns = (
        "transactional_id",
        "coordinator",
        "producer_id",
        "epoch",
        "state",
        "timeout_ms",
        "start_time_ms",
        "open_ms",
        "partitions",
    )
    print_rows(args, columns, rows)
    return 0


def abort_spec(args: argparse.Namespace, admin: AdminClient) -> AbortTransactionSpec:
    """The producer to abort: given in full, or found by its transaction's first offset."""
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None:
        return AbortTransactionSpec(
            tp, args.producer_id, args.producer_epoch, args.coordinator_epoch
        )
    for state in admin.describe_producers([tp]).all()[tp]:
        if state.current_transaction_start_offset == args.start_offset:
            return AbortTransactionSpec(
                tp, state.producer_id, state.producer_epoch, state.coordinator_epoch or 0
            )
    raise KafkaError(
        f"no open transaction starts at offset {args.start_offset} of {tp.topic}-"
        f"{tp.partition} (kafkette producers {tp.topic} -p {tp.partition} lists them)"
    )


def abort_transaction(args: argparse.Namespace) -> int:
    given = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None and any(value is not None for value in given):
        raise UsageError("give --start-offset or the producer's id and epochs, not both")
    if args.start_offset is None and any(value is None for value in given):
        raise UsageError(
            "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
        )
    with admin_for(args) as admin:
        spec = abort_spec(args, admin)
        admin.abort_transaction(spec).all()
    tp = spec.topic_partition
    print_rows(
        args,
        ("topic", "partition", "producer_id", "epoch", "coordinator_epoch"),
        [(tp.topic, tp.partition, spec.producer_id, spec.producer_epoch, spec.coordinator_epoch)],
    )
    return 0


def describe_producers(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        if args.partitions:
            numbers = sorted(set(args.partitions))
        else:
            topic = admin.describe_topics([args.topic]).all()[args.topic]
            numbers = sorted(p.partition for p in topic.partitions)
        tps = [TopicPartition(args.topic, p) for p in numbers]
        found = admin.describe_producers(tps).all()
    rows = [
        (
            tp.topic,
            tp.partition,
            s.producer_id,
            s.producer_epoch,
            s.last_sequence,
            s.last_timestamp,
            s.coordinator_epoch,
            s.current_transaction_start_offset,
        )
        for tp in tps
        for s in found[tp]
    ]
    columns = (
        "topic",
        "partition",
        "producer_id",
        "epoch",
        "last_sequence",
        "last_timestamp",
        "coordinator_epoch",
        "txn_start_offset",
    )
    print_rows(args, columns, rows)
    return 0
