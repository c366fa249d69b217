"""The command line's small parsers, in-process (no broker)."""

from __future__ import annotations

import pytest

from kafkette.cli import main
from kafkette.cli.common import UsageError
from kafkette.cli.consume import Start, parse_offsets, parse_time
from kafkette.cli.formats import unescape
from kafkette.cli.groups import parse_duration


def test_unescape() -> None:
    assert unescape("a\\tb\\n\\r\\0\\\\\\x41\\xzz;") == b"a\tb\n\r\0\\A\\xzz;"
    assert unescape("é") == "é".encode()


def test_durations() -> None:
    assert parse_duration("PT1H30M") == 5_400_000
    assert parse_duration("P1DT1S") == 86_401_000
    assert parse_duration("pt0.25s") == 250
    for bad in ("P", "PT", "1H", "PT1X"):
        with pytest.raises(UsageError):
            parse_duration(bad)


def test_offsets_and_times() -> None:
    assert parse_offsets([], None) == (Start("beginning"), None)
    assert parse_offsets(["-3", "e@9"], None) == (Start("tail", -3), 9)
    assert parse_offsets(["7"], None) == (Start("offset", 7), None)
    assert parse_offsets([], "1970-01-01T02:00:01+02:00") == (Start("time", 1000), None)
    assert parse_time("1970-01-01T00:00:02.5", "--x") == 2500
    with pytest.raises(UsageError):
        parse_offsets(["end", "beginning"], None)
    with pytest.raises(UsageError, match="before 1970"):
        parse_time("1969-12-31T23:59:59Z", "--from-time")


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["topics", "create", "orders", "-p", "3"], "kafkette topics create"),
        (["produce", "orders", "--bogus"], "kafkette produce"),
        (["serve", "--memory", "--bogus"], "kafkette serve"),
    ],
)
def test_an_unknown_argument_is_named_by_its_subcommand(
    argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse itself blames the top-level parser ("usage: kafkette [-h] COMMAND ...")."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"usage: {command} [-h]")
    unknown = "-p 3" if argv[-1] == "3" else argv[-1]
    assert error.endswith(f"{command}: error: unrecognized arguments: {unknown}\n")
