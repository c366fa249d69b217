"""``kafkette produce TOPIC``: records from stdin (or one file) to a topic.

One record per line (``-D`` for another delimiter), empty records skipped as
kcat does; ``-K DELIM`` splits each record at the first DELIM into key and
value (a record without it has no key); ``-Z`` sends an empty key or value as
null. Nothing is printed on success unless ``-v``, which prints each record's
partition and offset.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import IO, Any

from kafkette.cli.common import (
    Subcommands,
    UsageError,
    add_common_arguments,
    client_settings,
    print_rows,
)
from kafkette.cli.formats import unescape
from kafkette.producer.futures import RecordFuture
from kafkette.producer.sync_producer import Producer

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
READ_SIZE = 65_536


def add_parser(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "produce",
        help="write records from stdin to a topic",
        description="Write records from stdin (one a line) to TOPIC.",
    )
    parser.add_argument("topic")
    parser.add_argument("-D", dest="delimiter", default="\\n", help="record delimiter")
    parser.add_argument("-K", dest="key_delimiter", help="split key and value at this delimiter")
    parser.add_argument(
        "-H",
        dest="headers",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record (repeatable; NAME alone: a null value)",
    )
    parser.add_argument("-p", dest="partition", type=int, help="write to this partition")
    parser.add_argument("-z", dest="codec", choices=CODECS, help="compression codec")
    parser.add_argument("--acks", choices=("all", "-1", "0", "1"), help="acks (default all)")
    parser.add_argument(
        "--transactional-id", metavar="ID", help="send all of stdin in one transaction"
    )
    parser.add_argument("-l", dest="file", metavar="FILE", help="send the whole FILE as one value")
    parser.add_argument("-Z", dest="null_empty", action="store_true", help="send empty as null")
    parser.add_argument("-v", dest="verbose", action="store_true", help="print the offsets")
    add_common_arguments(parser)
    parser.set_defaults(run=run)


def read_records(stream: IO[bytes], delimiter: bytes) -> Iterator[bytes]:
    """The non-empty pieces of ``stream`` between delimiters, as they arrive."""
    pending = b""
    while True:
        chunk = stream.read1(READ_SIZE) if hasattr(stream, "read1") else stream.read(READ_SIZE)
        if not chunk:
            break
        pending += chunk
        *records, pending = pending.split(delimiter)
        yield from (r for r in records if r)
    if pending:
        yield pending


def split_key(
    record: bytes, key_delimiter: bytes | None, null_empty: bool
) -> tuple[bytes | None, bytes | None]:
    key: bytes | None = None
    value: bytes | None = record
    if key_delimiter is not None:
        head, sep, tail = record.partition(key_delimiter)
        if sep:
            key, value = head, tail
    if null_empty:
        key = key or None
        value = value or None
    return key, value


def parse_headers(texts: list[str]) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    for text in texts:
        name, sep, value = text.partition("=")
        headers.append((name, value.encode() if sep else None))
    return headers


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"-l {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {}
    if args.codec:
        overrides["compression.type"] = args.codec
    if args.acks:
        overrides["acks"] = args.acks
    if args.transactional_id:
        overrides["transactional.id"] = args.transactional_id
    headers = parse_headers(args.headers)
    key_delimiter = unescape(args.key_delimiter) if args.key_delimiter is not None else None
    delimiter = unescape(args.delimiter)
    futures: list[RecordFuture] = []
    with Producer(client_settings(args, "producer", **overrides)) as producer:
        if args.transactional_id:
            producer.init_transactions()
            producer.begin_transaction()
        if args.file:
            records: Iterator[bytes] = iter([read_file(args.file)])
        else:
            records = read_records(sys.stdin.buffer, delimiter)
        for record in records:
            key, value = (
                (None, record) if args.file else split_key(record, key_delimiter, args.null_empty)
            )
            futures.append(
                producer.send(args.topic, value, key=key, headers=headers, partition=args.partition)
            )
        producer.flush()
        if args.transactional_id:
            producer.commit_transaction()
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    if args.verbose:
        rows = [(m.topic, m.partition, m.offset) for m in (f.result() for f in futures)]
        print_rows(args, ("topic", "partition", "offset"), rows)
    return 0
