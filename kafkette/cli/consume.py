"""``kafkette consume TOPIC...``: print records, kcat style.

Without ``-G`` the partitions of the topics (or ``-p``'s) are assigned and read
from ``-o``: ``beginning`` (the default, as kcat), ``end``, an absolute offset,
``-N`` (N before the end), ``s@MS`` (the first record at or after a timestamp)
and ``e@MS`` (stop before the first record at or after a timestamp; may be given
with a start). ``--from-time ISO8601`` is ``s@`` with a date. With ``-G GROUP``
the topics are subscribed as a balanced group member that commits its
positions; there ``-o beginning|end`` only chooses where a partition without a
committed offset starts. With ``--share-group GROUP`` the topics are read as a
member of that share group (KIP-932, Kafka's queues): each record printed is
accepted, as the share consumer's implicit acknowledgement does (a record acquired
beyond ``-c`` is released, so another member gets it); ``-c`` is the only option
of the reading kind it takes.

``-e`` ends the command once every partition is read to the end it had when
the command started (with ``read_committed``, its last stable offset), ``-c``
after COUNT records. Output is ``-f FORMAT`` (kcat's tokens, see
:mod:`kafkette.cli.formats`), by default the value and a newline (``-K DELIM``:
key, DELIM, value), or with ``--json`` one JSON object per record and line.
``--key-format``/``--value-format`` ``avro|json|protobuf`` decode keys or values
framed for a schema registry (``--schema-registry URL``, see
:mod:`kafkette.cli.schemas`) and print them as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
from typing import Any

import attrs

from kafkette.admin.sync_client import AdminClient
from kafkette.admin.types import OffsetSpec
from kafkette.cli import schemas
from kafkette.cli.common import Subcommands, UsageError, add_common_arguments, client_settings
from kafkette.cli.formats import RecordFormat, unescape
from kafkette.consumer.consumer import Consumer
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.share.consumer import ShareConsumer
from kafkette.consumer.share.record import AcknowledgeType, ShareConsumerRecord
from kafkette.structs import TopicPartition

POLL_TIMEOUT_S = 0.5
INTERRUPTED_CLOSE_S = 0.5
"""After Ctrl-C, how long the consumer may take to commit and leave its group: the
command ends at once, never waiting for a rebalance or an unresponsive broker."""


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "consume",
        help="print records of topics",
        description="Print the records of TOPICs.",
    )
    parser.add_argument("topics", nargs="+", metavar="TOPIC")
    parser.add_argument(
        "-o",
        dest="offsets",
        action="append",
        default=[],
        metavar="OFFSET",
        help="beginning|end|stored|N|-N|s@MS|e@MS (default beginning)",
    )
    parser.add_argument("-p", dest="partition", type=int, help="only this partition")
    parser.add_argument("-G", dest="group", help="consume as a member of this group, committing")
    parser.add_argument(
        "--share-group",
        metavar="GROUP",
        help="consume as a member of this share group (Kafka's queues), accepting each record",
    )
    parser.add_argument("-c", dest="count", type=int, help="exit after COUNT records")
    parser.add_argument(
        "-e", dest="exit_at_end", action="store_true", help="exit at the end of every partition"
    )
    parser.add_argument("-f", dest="format", help="output format (kcat's %%-tokens)")
    parser.add_argument("-K", dest="key_delimiter", help="print the key and this before the value")
    parser.add_argument(
        "--isolation",
        choices=("read_uncommitted", "read_committed"),
        help="read_committed skips aborted and open transactions",
    )
    parser.add_argument(
        "--from-time", metavar="ISO8601", help="start at this time (UTC without a zone)"
    )
    formats = parser.add_argument_group("registry-framed keys and values, printed as JSON")
    for part in ("key", "value"):
        formats.add_argument(f"--{part}-format", choices=schemas.FORMATS, default="bytes")
    schemas.add_registry_arguments(parser)
    add_common_arguments(parser)
    parser.set_defaults(run=run)


@attrs.frozen
class Start:
    """Where reading starts: ``kind`` is beginning, end, stored, offset, tail or time."""

    kind: str
    value: int = 0


def parse_offsets(texts: list[str], from_time: str | None) -> tuple[Start, int | None]:
    """The start and the stop timestamp (``e@``) of the ``-o`` options."""
    start: Start | None = None
    stop: int | None = None
    for text in texts:
        if text.startswith("e@"):
            stop = _millis(text[2:], text)
            continue
        if start is not None:
            raise UsageError(f"-o {text}: only one start offset (and one e@) may be given")
        if text in ("beginning", "end", "stored"):
            start = Start(text)
        elif text.startswith("s@"):
            start = Start("time", _millis(text[2:], text))
        elif text.lstrip("-").isdigit():
            number = int(text)
            start = Start("tail", number) if number < 0 else Start("offset", number)
        else:
            raise UsageError(f"-o {text}: expected beginning|end|stored|N|-N|s@MS|e@MS")
    if from_time is not None:
        if start is not None:
            raise UsageError("--from-time and a start -o cannot be given together")
        start = Start("time", parse_time(from_time, "--from-time"))
    return start or Start("beginning"), stop


def _millis(text: str, option: str) -> int:
    if not text.isdigit():
        raise UsageError(f"-o {option}: expected a timestamp in milliseconds")
    return int(text)


def parse_time(text: str, option: str) -> int:
    """An ISO 8601 date and time as epoch milliseconds (UTC when it names no zone)."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    millis = int(moment.timestamp() * 1000)
    if millis < 0:  # negative numbers mean earliest and latest to ListOffsets
        raise UsageError(f"{option} {text!r}: must not be before 1970-01-01T00:00:00Z")
    return millis


class Printer:
    """Writes records to stdout in the chosen format."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.json = args.json and args.format is None
        if args.format is not None:
            spec = args.format
        elif args.key_delimiter is not None:
            spec = "%k" + args.key_delimiter.replace("%", "%%") + "%s\\n"
        else:
            spec = "%s\\n"
        self.format = RecordFormat(spec)
        self.out = sys.stdout.buffer

    def write(self, record: ConsumerRecord | ShareConsumerRecord) -> None:
        if self.json:
            self.out.write(json.dumps(record_json(record)).encode() + b"\n")
        elif isinstance(record, ShareConsumerRecord):  # the format's tokens are its first fields
            self.out.write(self.format.format(ConsumerRecord._make(record[:9])))
        else:
            self.out.write(self.format.format(record))

    def flush(self) -> None:
        self.out.flush()


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def record_json(record: ConsumerRecord | ShareConsumerRecord) -> dict[str, Any]:
    shown = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": schemas.shown(record.key),
        "value": schemas.shown(record.value),
        "headers": [[name, _text(value)] for name, value in record.headers],
    }
    if isinstance(record, ShareConsumerRecord):
        shown["delivery_count"] = record.delivery_count
    return shown


def run(args: argparse.Namespace) -> int:
    start, stop_ms = parse_offsets(args.offsets, args.from_time)
    if args.key_delimiter is not None:
        unescape(args.key_delimiter)
    printer = Printer(args)
    overrides: dict[str, Any] = {}
    if args.share_group is not None:
        return _share_run(args, printer)
    if args.isolation:
        overrides["isolation.level"] = args.isolation
    if args.group:
        if args.partition is not None:
            raise UsageError("-p cannot be used with -G (the group assigns partitions)")
        if start.kind not in ("beginning", "end", "stored"):
            raise UsageError("with -G, -o is one of beginning, end, stored")
        overrides["group.id"] = args.group
        if start.kind != "stored":
            overrides["auto.offset.reset"] = "earliest" if start.kind == "beginning" else "latest"
    else:
        if start.kind == "stored":
            raise UsageError("-o stored needs a group (-G GROUP)")
        overrides["enable.auto.commit"] = "false"
    if args.count is not None and args.count < 1:
        raise UsageError("-c must be at least 1")
    isolation = args.isolation or "read_uncommitted"
    decoded = {f"{p}.deserializer": getattr(args, f"{p}_format") for p in ("key", "value")}
    decoded = {setting: kind for setting, kind in decoded.items() if kind != "bytes"}
    with contextlib.ExitStack() as stack:
        if decoded:
            registry = stack.enter_context(schemas.registry_client(args))
            for setting, kind in decoded.items():
                overrides[setting] = schemas.decoder(kind, registry)
        return _consume(args, printer, start, stop_ms, overrides, isolation)


def _consume(
    args: argparse.Namespace,
    printer: Printer,
    start: Start,
    stop_ms: int | None,
    overrides: dict[str, Any],
    isolation: str,
) -> int:
    with (
        AdminClient(client_settings(args, "admin")) as admin,
        Consumer(client_settings(args, "consumer", **overrides)) as consumer,
    ):
        # Offsets are looked up by the admin client: on the consumer's connection a
        # lookup would wait behind the fetch the broker holds open (fetch.max.wait.ms).
        offsets = Offsets(admin, isolation)
        ends = offsets if args.exit_at_end else None
        reader = Reader(consumer, printer, args.count, ends, stop_ms)
        try:
            if args.group:
                consumer.subscribe(args.topics)
            else:
                partitions = topic_partitions(admin, args.topics, args.partition)
                starts = offsets.start(partitions, start)
                consumer.assign(partitions)
                for tp, offset in starts.items():
                    consumer.seek(tp, offset)
            reader.run()
        except KeyboardInterrupt:
            consumer.close(timeout=INTERRUPTED_CLOSE_S)
            raise
    return 0


SHARE_EXCLUDES = {
    "group": "-G",
    "partition": "-p",
    "exit_at_end": "-e",
    "isolation": "--isolation",
    "from_time": "--from-time",
}
"""Options that choose partitions or positions, which a share group's broker chooses."""


def _share_run(args: argparse.Namespace, printer: Printer) -> int:
    for attribute, option in SHARE_EXCLUDES.items():
        value = getattr(args, attribute)
        if value is not None and value is not False:  # -p 0 is given
            raise UsageError(f"{option} cannot be used with --share-group")
    if args.offsets:
        raise UsageError("-o cannot be used with --share-group (the share group keeps its place)")
    if not args.share_group:
        raise UsageError("--share-group needs a group name")
    if args.count is not None and args.count < 1:
        raise UsageError("-c must be at least 1")
    overrides: dict[str, Any] = {
        "group.id": args.share_group,
        # Explicit, so that a record acquired beyond -c is released rather than accepted
        # unprinted; each printed record is accepted, as implicit mode would.
        "share.acknowledgement.mode": "explicit",
    }
    with contextlib.ExitStack() as stack:
        decoded = {f"{p}.deserializer": getattr(args, f"{p}_format") for p in ("key", "value")}
        decoded = {setting: kind for setting, kind in decoded.items() if kind != "bytes"}
        if decoded:
            registry = stack.enter_context(schemas.registry_client(args))
            for setting, kind in decoded.items():
                overrides[setting] = schemas.decoder(kind, registry)
        consumer = stack.enter_context(
            ShareConsumer(client_settings(args, "share consumer", **overrides))
        )
        consumer.subscribe(args.topics)
        left = args.count
        try:
            while left is None or left > 0:
                for record in consumer.poll(timeout=POLL_TIMEOUT_S):
                    if left is not None and left <= 0:
                        consumer.acknowledge(record, AcknowledgeType.RELEASE)
                        continue
                    printer.write(record)
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                    if left is not None:
                        left -= 1
                printer.flush()
        except KeyboardInterrupt:
            consumer.close(timeout=INTERRUPTED_CLOSE_S)
            raise
    return 0


def topic_partitions(
    admin: AdminClient, topics: list[str], only: int | None
) -> list[TopicPartition]:
    described = admin.describe_topics(topics).all()
    partitions = [
        TopicPartition(name, p.partition)
        for name in topics
        for p in described[name].partitions
        if only is None or p.partition == only
    ]
    if not partitions:
        raise UsageError(f"-p {only}: no such partition in {', '.join(topics)}")
    return sorted(partitions)


class Offsets:
    """ListOffsets through the admin client."""

    def __init__(self, admin: AdminClient, isolation: str) -> None:
        self.admin = admin
        self.isolation = isolation

    def lookup(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        found = self.admin.list_offsets(specs, isolation_level=self.isolation).all()
        return {tp: info.offset for tp, info in found.items()}

    def ends(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offsets: high watermarks, or last stable offsets with read_committed."""
        return self.lookup(dict.fromkeys(partitions, OffsetSpec.LATEST))

    def start(self, partitions: list[TopicPartition], start: Start) -> dict[TopicPartition, int]:
        """Where each partition starts for ``start``."""
        if start.kind == "offset":
            return dict.fromkeys(partitions, start.value)
        begins = self.lookup(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
        if start.kind == "beginning":
            return begins
        ends = self.ends(partitions)
        if start.kind == "end":
            return ends
        if start.kind == "tail":
            return {tp: max(begins[tp], ends[tp] + start.value) for tp in partitions}
        found = self.lookup(dict.fromkeys(partitions, start.value))
        # no record at or after the time: the end
        return {tp: ends[tp] if found[tp] < 0 else found[tp] for tp in partitions}


class Reader:
    """The poll loop: prints records until the count, the ends or the stop time."""

    def __init__(
        self,
        consumer: Consumer,
        printer: Printer,
        count: int | None,
        exit_at_end: Offsets | None,
        stop_ms: int | None,
    ) -> None:
        self.consumer = consumer
        self.printer = printer
        self.left = count
        self.exit_at_end = exit_at_end
        self.stop_ms = stop_ms
        self.ends: dict[TopicPartition, int] = {}
        self.done: set[TopicPartition] = set()

    def run(self) -> None:
        consumer = self.consumer
        while self.left is None or self.left > 0:
            batch = consumer.poll(timeout=POLL_TIMEOUT_S, max_records=self.left)
            for tp in sorted(batch):
                for record in batch[tp]:
                    self.take(tp, record)
            self.printer.flush()
            if self.finished(not batch):
                return

    def take(self, tp: TopicPartition, record: ConsumerRecord) -> None:
        if tp in self.done:
            return
        if self.stop_ms is not None and record.timestamp >= self.stop_ms:
            self.finish(tp)
            return
        self.printer.write(record)
        if self.left is not None:
            self.left -= 1

    def finish(self, tp: TopicPartition) -> None:
        self.done.add(tp)
        self.consumer.pause(tp)

    def finished(self, idle: bool) -> bool:
        """Whether every assigned partition is done (at its end with ``-e``, past the stop)."""
        assigned = self.consumer.assignment()
        if not assigned:
            return False
        if self.exit_at_end is not None:
            new = [tp for tp in assigned if tp not in self.ends]
            if new:
                self.ends.update(self.exit_at_end.ends(new))
            for tp in sorted(assigned - self.done):
                if self.consumer.position(tp) >= self.ends[tp]:
                    self.finish(tp)
        return assigned <= self.done
