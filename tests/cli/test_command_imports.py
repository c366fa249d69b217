"""A subcommand imports its own module only: ``kafkette produce`` does not load the
admin client, the consumers or the broker (#30: every command paid 1.5 s for them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkette.cli import CLIENT_COMMANDS, build_parser

HEAVY = (
    "kafkette.admin.client",
    "kafkette.consumer.async_consumer",
    "kafkette.consumer.share.async_consumer",
    "kafkette.producer.producer",
    "kafkette.server.broker",
)


def loaded_by(command: str) -> list[str]:
    """The CLI modules and clients' modules a new interpreter holds after parsing
    ``kafkette COMMAND --help`` (SystemExit caught)."""
    script = (
        "import contextlib, io, sys\n"
        "from kafkette.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main([{command!r}, '--help'])\n"
        f"heavy = {HEAVY!r}\n"
        "print(' '.join(sorted(m for m in sys.modules\n"
        "    if m in heavy or (m.startswith('kafkette.cli.') and m != 'kafkette.cli.common'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.split()


def test_produce_loads_the_producer_only() -> None:
    assert loaded_by("produce") == [
        "kafkette.cli.formats",
        "kafkette.cli.produce",
        "kafkette.producer.producer",
    ]


def test_topics_loads_the_admin_client_only() -> None:
    assert loaded_by("topics") == ["kafkette.admin.client", "kafkette.cli.topics"]


def test_the_whole_parser_has_every_command() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(commands) == ["serve", *CLIENT_COMMANDS]


@pytest.mark.parametrize("command", ["serve", *CLIENT_COMMANDS])
def test_a_command_s_parser_has_that_command(command: str) -> None:
    commands = build_parser(command)._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    siblings = {"txns": ["txns", "producers"], "producers": ["txns", "producers"]}
    assert list(commands) == siblings.get(command, [command])


def test_a_command_line_parsed_alone_runs_its_command() -> None:
    from kafkette.cli import produce, txns

    args = build_parser("produce").parse_args(["produce", "orders", "-K", ":"])
    assert (args.command, args.topic, args.run) == ("produce", "orders", produce.run)
    args = build_parser("producers").parse_args(["producers", "orders", "-p", "2"])
    assert (args.command, args.topic, args.partitions, args.run) == (
        "producers",
        "orders",
        [2],
        txns.describe_producers,
    )


def test_an_unknown_command_is_told_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser("prodcue").parse_args(["prodcue", "t"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'prodcue'" in error
    assert "'serve', 'produce', 'consume'" in error
