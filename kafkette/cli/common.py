"""What every ``kafkette`` subcommand shares: connection options, client settings,
output as aligned text tables or JSON, and the errors that end a command.

Client settings come, later ones winning, from ``-F FILE`` (a properties file),
``-X key=value`` and ``-b SERVERS``; without any bootstrap setting the servers
are ``$KAFKETTE_BOOTSTRAP_SERVERS``, else ``localhost:9092``. A setting is
passed to each client that knows it (``group.id`` to the consumer only); one
that no client knows is a usage error naming it.

A ``file:///path/to/data-dir`` bootstrap (a stopped ``kafkette serve --data-dir``
directory, served in this process) is always opened read-only
(``file:///path?mode=ro``, see :mod:`kafkette.client.inprocess`): reading
commands work, the broker refuses writes with Kafka's authorization errors.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from kafkette.client.config import (
    AdminConfig,
    ClientConfig,
    ConsumerConfig,
    ProducerConfig,
    ShareConsumerConfig,
)
from kafkette.errors import ConfigError

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "KAFKETTE_BOOTSTRAP_SERVERS"
FILE_SCHEME = "file://"
READ_ONLY = "?mode=ro"

CLIENT_CONFIGS: dict[str, type[ClientConfig]] = {
    "producer": ProducerConfig,
    "consumer": ConsumerConfig,
    "share consumer": ShareConsumerConfig,
    "admin": AdminConfig,
}


Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each subcommand module adds its parser to it."""


class UsageError(Exception):
    """A command line that cannot be run as given: exit status 2."""


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``-b``, ``-X``, ``-F``, ``--json`` and ``--debug``, on every client subcommand."""
    group = parser.add_argument_group("connection and output")
    group.add_argument(
        "-b",
        "--bootstrap-server",
        metavar="SERVERS",
        help=f"HOST:PORT[,HOST:PORT...] (default: ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument(
        "-X",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client setting by its Kafka name (repeatable)",
    )
    group.add_argument(
        "-F",
        dest="properties_files",
        action="append",
        default=[],
        metavar="FILE",
        help="client settings from a properties file (key=value lines)",
    )
    group.add_argument("--json", action="store_true", help="print JSON instead of text")
    group.add_argument("--debug", action="store_true", help="print a traceback on errors")


def read_properties(path: str) -> dict[str, str]:
    """``key=value`` (or ``key: value``) lines; ``#`` and ``!`` start comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UsageError(f"-F {path}: {exc.strerror or exc}") from None
    properties: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise UsageError(f"{path}:{number}: expected key=value, got {line!r}")
        properties[key.strip()] = value.strip()
    return properties


def parse_setting(text: str, option: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{option} {text!r}: expected KEY=VALUE")
    return key.strip(), value


def settings_from(args: argparse.Namespace) -> dict[str, str]:
    """Every client setting of the command line, by Kafka name, checked against the
    clients' settings (an unknown one raises ConfigError naming it)."""
    settings: dict[str, str] = {}
    for path in args.properties_files:
        settings.update(read_properties(path))
    for text in args.settings:
        key, value = parse_setting(text, "-X")
        settings[key] = value
    if args.bootstrap_server:
        settings["bootstrap.servers"] = args.bootstrap_server
    elif "bootstrap.servers" not in settings:
        settings["bootstrap.servers"] = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    settings["bootstrap.servers"] = read_only_file_url(settings["bootstrap.servers"])
    for name in settings:
        if not any(_knows(config, name) for config in CLIENT_CONFIGS.values()):
            known = sorted({n for c in CLIENT_CONFIGS.values() for n in c.kafka_names()})
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(name, f"unknown client setting{hint}")
    return settings


def read_only_file_url(servers: str) -> str:
    """``servers``, with a ``file://`` directory opened read-only (``?mode=ro``)."""
    url = servers.strip()
    if not url.startswith(FILE_SCHEME):
        return servers
    path, _, query = url.partition("?")
    if query not in ("", READ_ONLY[1:]):
        raise UsageError(f"-b {url}: the kafkette command opens file:// directories read-only")
    return path + READ_ONLY


def is_read_only_file_url(servers: str) -> bool:
    return servers.startswith(FILE_SCHEME) and servers.endswith(READ_ONLY)


def _knows(config: type[ClientConfig], name: str) -> bool:
    names = config.kafka_names()
    return name in names or name.replace("_", ".") in names or name in names.values()


def client_settings(args: argparse.Namespace, kind: str, **overrides: Any) -> dict[str, Any]:
    """The settings of ``args`` that client ``kind`` (producer, consumer, admin) knows,
    with ``overrides`` (Kafka names) on top."""
    config = CLIENT_CONFIGS[kind]
    chosen: dict[str, Any] = {
        name: value for name, value in args.client_settings.items() if _knows(config, name)
    }
    for name, value in overrides.items():
        for given in [n for n in chosen if _same(config, n, name)]:
            del chosen[given]
        chosen[name] = value
    return chosen


def _same(config: type[ClientConfig], a: str, b: str) -> bool:
    names = config.kafka_names()

    def attr(name: str) -> str:
        return names.get(name) or names.get(name.replace("_", ".")) or name

    return attr(a) == attr(b)


# ---- output


def text(value: Any) -> str:
    """A table cell: None as ``-``, sequences joined by commas."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, frozenset, set)):
        return ",".join(text(v) for v in value) if value else "-"
    return str(value)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned text table: a header of ``columns``, cells left-aligned, two spaces apart."""
    cells = [[c.upper() for c in columns]] + [[text(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return "\n".join(lines) + "\n"


def print_rows(
    args: argparse.Namespace, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Rows as a table, or with ``--json`` as a list of objects keyed by ``columns``."""
    if args.json:
        print_json([dict(zip(columns, row, strict=True)) for row in rows])
    else:
        write(table(columns, rows))


def print_json(value: Any) -> None:
    write(json.dumps(value, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()
