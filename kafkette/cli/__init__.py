"""The ``kafkette`` command: ``kafkette serve`` runs a broker; the other subcommands
are clients of any Kafka cluster (see docs/cli.md).

Exit status: 0 on success, 1 on a Kafka error (one line on stderr naming it; a
traceback too with ``--debug``), 2 on a usage error (a bad option, an unknown
client setting), 130 after Ctrl-C and 141 when stdout is closed early
(``| head``), both without a message.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from typing import Any

from kafkette.cli.common import UsageError, is_read_only_file_url, settings_from
from kafkette.errors import AuthorizationError, ConfigError, KafkaError

EXIT_KAFKA_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

CLIENT_COMMANDS = {
    "produce": "produce",
    "consume": "consume",
    "topics": "topics",
    "offsets": "offsets",
    "groups": "groups",
    "txns": "txns",
    "producers": "txns",
    "users": "users",
    "cluster": "cluster",
    "perf": "perf",
    "schemas": "schemas",
}
"""The client subcommands, in the order of ``kafkette --help``, and the module
``kafkette.cli.<module>`` whose ``add_parser`` adds each."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand's, or, given the name of one, only
    its module's. Each subcommand's module imports the clients it runs (the broker for
    ``serve``), and importing them all took most of a second of every command's start."""
    parser = argparse.ArgumentParser(prog="kafkette", description="Kafka for Python.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command == "serve":
        modules: list[str] = []
    elif command in CLIENT_COMMANDS:
        modules = [CLIENT_COMMANDS[command]]
    else:  # none, or one argparse will refuse, listing them all
        modules = list(dict.fromkeys(CLIENT_COMMANDS.values()))
    if command not in CLIENT_COMMANDS:
        from kafkette.cli import serve

        serve.add_arguments(commands.add_parser("serve", help="run a Kafka broker"))
    for module in modules:
        importlib.import_module(f"kafkette.cli.{module}").add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would name the top-level command and show its usage
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":
        from kafkette.cli import serve

        return serve.main(args)
    return run(args)


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser that parsed ``args`` last: ``kafkette topics create``'s
    for ``kafkette topics create ...``, whose usage an error about its arguments shows."""
    while True:
        chosen = [
            action.choices[getattr(args, action.dest)]
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            and getattr(args, action.dest, None) in action.choices
        ]
        if not chosen:
            return parser
        parser = chosen[0]


def run(args: argparse.Namespace) -> int:
    """Run a client subcommand; every way it can end becomes an exit status."""
    name = " ".join(["kafkette", args.command, *([args.action] if "action" in args else [])])
    _route_logs(debug=getattr(args, "debug", False))
    try:
        args.client_settings = settings_from(args)
        return int(args.run(args))
    except (UsageError, ConfigError) as exc:
        _report(args, f"{name}: error: {exc}")
        return EXIT_USAGE
    except KafkaError as exc:
        line = error_line(exc)
        servers = getattr(args, "client_settings", {}).get("bootstrap.servers", "")
        if (
            isinstance(exc, AuthorizationError)
            and is_read_only_file_url(servers)
            and "read-only" not in line
        ):
            # The read-only broker's refusal; not every answer carries its message.
            line += f" ({servers.removesuffix('?mode=ro')} is opened read-only)"
        _report(args, f"{name}: {line}")
        return EXIT_KAFKA_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        _report(args, f"{name}: unexpected error: {type(exc).__name__}: {exc}")
        return EXIT_KAFKA_ERROR


def error_line(error: KafkaError) -> str:
    """The error's text, starting with its Kafka name (``TIMEOUT: ...``)."""
    line = " ".join(str(error).split()) or error.description
    return line if line.startswith(error.name) else f"{error.name}: {line}"


def _route_logs(*, debug: bool) -> None:
    """The clients' log lines (a producer's fatal error, say) reach stderr only with
    ``--debug``: otherwise Python's last-resort handler would print their warnings
    beside the command's one-line error. A failure to connect is shown at once, each
    address's once (as kcat does), so a wrong address does not look like a hang."""
    if debug:
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
        return
    root = logging.getLogger("kafkette")
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())
    failures = logging.getLogger("kafkette.client.failures")
    if not any(isinstance(h, _CurrentStderr) for h in failures.handlers):
        shown = _CurrentStderr()
        shown.setFormatter(logging.Formatter("kafkette: %(message)s"))
        failures.addHandler(shown)
    failures.propagate = False


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a line is logged, not the stream of
    the first call: ``main`` called again in one process (by a test, or an app that
    embeds the CLI) neither adds a second handler nor writes to a closed stream."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        """StreamHandler's constructor assigns a stream; the getter ignores it."""


def _report(args: argparse.Namespace, line: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc()
    print(line, file=sys.stderr)


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
