"""``kafkette groups list|describe|delete|reset-offsets``.

``list`` shows groups of every type (classic, consumer, share) with their type
and state. ``describe`` shows a consumer group's state and, per partition it
committed or was assigned, the committed offset, the end offset, the lag and the
member; a share group's state and, per partition it has a state for or assigns,
the start offset (where the group reads next), the end offset, the lag (records
from the start not yet acknowledged for good) and the members it is assigned to,
as ``kafka-share-groups.sh --describe``, then its members.
``reset-offsets`` takes kafka-consumer-groups' options: a target
(``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime``,
``--shift-by N``, ``--by-duration PnDTnHnMnS``), the partitions (``--topic
T[:P,...]``, repeatable, or ``--all-topics``: those the group committed), and
``--dry-run`` (the default: print the plan, and a note on stderr) or
``--execute``. As Kafka, it refuses a group with active members. New offsets
are kept within each partition's earliest and latest offsets; a partition
without a committed offset shifts from its earliest. For a share group it moves
the start offsets, as ``kafka-share-groups.sh --reset-offsets`` (``--all-topics``:
the partitions it has a state for; ``--shift-by`` from the start offset).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from kafkette.admin.share_types import ShareGroupDescription
from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import GroupState, OffsetSpec
from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    print_json,
    print_rows,
    table,
    write,
)
from kafkette.cli.consume import parse_time
from kafkette.errors import GroupIdNotFoundError, IllegalStateError, UnsupportedVersionError
from kafkette.structs import OffsetAndMetadata, TopicPartition

INACTIVE = (GroupState.EMPTY, GroupState.DEAD)


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "groups", help="list, describe, delete and reset consumer and share groups"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="groups, their types and states")
    listing.set_defaults(run=list_groups)

    describe = actions.add_parser("describe", help="members, offsets and lag of a group")
    describe.add_argument("group")
    describe.set_defaults(run=describe_group)

    delete = actions.add_parser("delete", help="delete groups without members")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(run=delete_groups)

    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("group")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--topic", action="append", metavar="TOPIC[:P,...]")
    where.add_argument("--all-topics", action="store_true")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--to-datetime", metavar="ISO8601")
    target.add_argument("--shift-by", type=int, metavar="N")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(run=reset_offsets)

    for action in (listing, describe, delete, reset):
        add_common_arguments(action)


def admin_for(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_settings(args, "admin"))


def list_groups(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        groups = admin.list_groups().all()
    rows = [
        (
            g.group_id,
            g.type.value.lower() if g.type else None,
            g.state.value if g.state else None,
            not g.protocol,
            g.coordinator,
        )
        for g in sorted(groups, key=lambda g: g.group_id)
    ]
    print_rows(args, ("group", "type", "state", "simple", "coordinator"), rows)
    return 0


def share_group(admin: AdminClient, group_id: str) -> ShareGroupDescription | None:
    """The share group ``group_id``, None when no share group has that id (or the broker
    serves no share groups)."""
    outcome = admin.describe_share_groups([group_id])[group_id]
    if isinstance(outcome.error, (GroupIdNotFoundError, UnsupportedVersionError)):
        return None
    return outcome.result()


def _ends(admin: AdminClient, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
    if not tps:
        return {}
    found = admin.list_offsets(dict.fromkeys(tps, spec)).all()
    return {tp: info.offset for tp, info in found.items()}


def describe_share_group(
    args: argparse.Namespace, admin: AdminClient, group: ShareGroupDescription
) -> None:
    starts = admin.list_share_group_offsets(group.group_id).all()
    owners: dict[TopicPartition, list[str]] = {}
    for member in group.members:
        for tp in member.assignment:
            owners.setdefault(tp, []).append(member.member_id)
    tps = sorted(set(owners) | set(starts))
    ends = _ends(admin, tps, OffsetSpec.LATEST)
    rows: list[tuple[Any, ...]] = []
    for tp in tps:
        info = starts.get(tp)
        rows.append(
            (
                tp.topic,
                tp.partition,
                info.start_offset if info else None,
                ends[tp],
                info.lag if info else None,
                ",".join(sorted(owners.get(tp, ()))) or None,
            )
        )
    columns = ("topic", "partition", "start", "end", "lag", "members")
    summary = (group.group_id, "share", group.state.value, group.assignor, len(group.members))
    summary_columns = ("group", "type", "state", "assignor", "members")
    member_columns = ("member", "client_id", "host", "partitions")
    members = [
        (
            m.member_id,
            m.client_id,
            m.host,
            ",".join(f"{tp.topic}:{tp.partition}" for tp in sorted(m.assignment)) or None,
        )
        for m in sorted(group.members, key=lambda m: m.member_id)
    ]
    if args.json:
        value: dict[str, Any] = dict(zip(summary_columns, summary, strict=True))
        value["partitions"] = [dict(zip(columns, row, strict=True)) for row in rows]
        value["assignments"] = [dict(zip(member_columns, row, strict=True)) for row in members]
        print_json(value)
        return
    text = table(summary_columns, [summary]) + "\n" + table(columns, rows)
    if members:
        text += "\n" + table(member_columns, members)
    write(text)


def describe_group(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        shared = share_group(admin, args.group)
        if shared is not None:
            describe_share_group(args, admin, shared)
            return 0
        group = admin.describe_consumer_groups([args.group]).all()[args.group]
        committed = admin.list_consumer_group_offsets(args.group).all()
        owners = {tp: m for m in group.members for tp in m.assignment}
        tps = sorted(set(owners) | {tp for tp, o in committed.items() if o is not None})
        ends = _ends(admin, tps, OffsetSpec.LATEST)
    rows: list[tuple[Any, ...]] = []
    for tp in tps:
        offset = committed.get(tp)
        current = offset.offset if offset is not None else None
        member = owners.get(tp)
        lag = ends[tp] - current if current is not None else None
        rows.append(
            (
                tp.topic,
                tp.partition,
                current,
                ends[tp],
                lag,
                member.member_id if member else None,
                member.client_id if member else None,
                member.host if member else None,
            )
        )
    columns = ("topic", "partition", "committed", "end", "lag", "member", "client_id", "host")
    summary = (
        group.group_id,
        group.state.value,
        group.partition_assignor or None,
        len(group.members),
    )
    summary_columns = ("group", "state", "assignor", "members")
    if args.json:
        value: dict[str, Any] = dict(zip(summary_columns, summary, strict=True))
        value["partitions"] = [dict(zip(columns, row, strict=True)) for row in rows]
        print_json(value)
    else:
        write(table(summary_columns, [summary]) + "\n" + table(columns, rows))
    return 0


def delete_groups(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        admin.delete_consumer_groups(args.groups).all()
    if args.json:
        print_json({"deleted": args.groups})
    else:
        write("".join(f"deleted group {g}\n" for g in args.groups))
    return 0


_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def parse_duration(text: str) -> int:
    """An ISO 8601 duration (``P1DT2H``, ``PT30M``, ``PT1.5S``) in milliseconds."""
    match = _DURATION.fullmatch(text.upper())
    if match is None or text.upper() in ("P", "PT"):
        raise UsageError(f"--by-duration {text!r}: expected an ISO 8601 duration, as PT1H30M")
    days, hours, minutes = (int(match[g] or 0) for g in "dhm")
    seconds = float(match["s"] or 0)
    return round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _partitions(
    admin: AdminClient, args: argparse.Namespace, committed: dict[TopicPartition, int | None]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(tp for tp, o in committed.items() if o is not None)
    chosen: list[TopicPartition] = []
    whole: list[str] = []
    for spec in args.topic:
        topic, sep, numbers = spec.partition(":")
        if not sep:
            whole.append(topic)
            continue
        try:
            chosen += [TopicPartition(topic, int(p)) for p in numbers.split(",")]
        except ValueError:
            raise UsageError(f"--topic {spec!r}: expected TOPIC or TOPIC:P,P...") from None
    if whole:
        described = admin.describe_topics(whole).all()
        chosen += [TopicPartition(t, p.partition) for t in whole for p in described[t].partitions]
    return sorted(set(chosen))


def reset_offsets(args: argparse.Namespace) -> int:
    with admin_for(args) as admin:
        shared = share_group(admin, args.group)
        if shared is not None:
            state, members = shared.state, len(shared.members)
            starts = admin.list_share_group_offsets(args.group).all()
            committed = {tp: (i.start_offset if i else None) for tp, i in starts.items()}
        else:
            group = admin.describe_consumer_groups([args.group]).all()[args.group]
            state, members = group.state, len(group.members)
            offsets = admin.list_consumer_group_offsets(args.group).all()
            committed = {tp: (o.offset if o else None) for tp, o in offsets.items()}
        if state not in INACTIVE:
            raise IllegalStateError(
                f"the offsets of group {args.group!r} can only be reset while it has no "
                f"active members; it has {members} and is {state.value}"
            )
        tps = _partitions(admin, args, committed)
        earliest = _ends(admin, tps, OffsetSpec.EARLIEST)
        latest = _ends(admin, tps, OffsetSpec.LATEST)
        current = {tp: committed.get(tp) for tp in tps}
        if args.to_datetime is not None or args.by_duration is not None:
            when = (
                parse_time(args.to_datetime, "--to-datetime")
                if args.to_datetime is not None
                else int(time.time() * 1000) - parse_duration(args.by_duration)
            )
            found = _ends(admin, tps, when)
            wanted = {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in tps}
        elif args.to_earliest:
            wanted = dict(earliest)
        elif args.to_latest:
            wanted = dict(latest)
        elif args.to_offset is not None:
            wanted = dict.fromkeys(tps, args.to_offset)
        else:
            wanted = {
                tp: (current[tp] if current[tp] is not None else earliest[tp]) + args.shift_by
                for tp in tps
            }
        new = {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in tps}
        if args.execute and new and shared is not None:
            admin.alter_share_group_offsets(args.group, new).all()
        elif args.execute and new:
            admin.alter_consumer_group_offsets(
                args.group, {tp: OffsetAndMetadata(offset) for tp, offset in new.items()}
            ).all()
    rows = [(args.group, tp.topic, tp.partition, current[tp], new[tp]) for tp in tps]
    print_rows(args, ("group", "topic", "partition", "current", "new"), rows)
    if not args.execute:
        print("dry run: nothing changed; --execute commits the new offsets", file=sys.stderr)
    return 0
