"""What keeps the docs' examples under test: every code block says what it is, every
set-up a document names exists (and none is left unused), and the shell examples are
read and compared as tests/docs/shell.py says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sybil import Document
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from tests.docs.examples import ROOT, SHELLS, documents
from tests.docs.setups import SETUPS
from tests.docs.shell import Command, first_missing, parse_block

LANGUAGES = {"python", "text", *SHELLS}
"""Run (python and the shells) or read (text); a block without a language could be a
shell example that nothing runs."""
_SETUP = re.compile(r"^[ \t]*<!-- test-setup: ([\w-]+) -->", re.MULTILINE)


def languages(path: Path) -> list[tuple[int, str]]:
    """(line, language) of every fenced block of a Markdown file."""
    document = Document(path.read_text(encoding="utf-8"), str(path))
    lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.M))
    return [
        (document.line_column(region.start)[0], region.lexemes["info"].strip())
        for region in lexer(document)
    ]


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_code_block_says_what_it_is(path: Path) -> None:
    unknown = [(line, info) for line, info in languages(path) if info not in LANGUAGES]
    assert unknown == [], f"{path.name}: blocks need one of {sorted(LANGUAGES)}"


def test_the_blocks_are_found() -> None:
    """The lexer sees the blocks (an empty list would pass the test above)."""
    found = {info for path in documents() for _, info in languages(path)}
    assert {"python", "text", "bash", "console"} <= found


def test_every_setup_named_exists_and_every_setup_is_named() -> None:
    named = {name for path in documents() for name in _SETUP.findall(path.read_text())}
    assert named == set(SETUPS)


def test_shell_blocks_are_read_as_commands_with_continuations_and_output() -> None:
    bash = "# a comment\nkafkette topics list\n\nkafkette serve \\\n  --memory\n"
    assert parse_block(bash, 10, console=False) == [
        Command(11, "kafkette topics list"),
        Command(13, "kafkette serve \\\n  --memory"),
    ]
    console = "$ kafkette serve \\\n    --memory\nlistening\n$ echo\n\nhi\n"
    assert parse_block(console, 1, console=True) == [
        Command(1, "kafkette serve \\\n    --memory", ["listening"]),
        Command(4, "echo", ["", "hi"]),
    ]
    with pytest.raises(ValueError, match="output before the first"):
        parse_block("output\n$ echo\n", 1, console=True)


def test_what_a_command_must_exit_with() -> None:
    assert Command(1, "kafkette consume orders -G billing  # -e in a comment").follows
    assert Command(1, "kafkette consume orders -G billing").expected_status == 130
    assert not Command(1, "kafkette consume orders -e").follows
    assert not Command(1, "kafkette consume orders -c 5").follows
    assert not Command(1, "kafkette consume orders -o s@1 -o e@2").follows
    assert not Command(1, "echo consume | kafkette produce t").follows
    error = "kafkette topics create: TOPIC_AUTHORIZATION_FAILED (29): Topic authorization failed."
    assert Command(1, "kafkette topics create t", ["", error]).expected_status == 1
    assert Command(1, "kafkette topics list", ["TOPIC  PARTITIONS"]).expected_status == 0


def test_shown_output_is_compared_by_shape_in_order() -> None:
    actual = ["TOPIC   PARTITION  LATEST", "orders  0          12", "orders  1          7"]
    assert first_missing(["TOPIC PARTITION LATEST", "orders 1 3"], actual, whole=True) is None
    assert first_missing(["orders 1 3", "TOPIC PARTITION LATEST"], actual, whole=True) == (
        "TOPIC PARTITION LATEST"
    )
    assert first_missing(["TOPIC PARTITION EARLIEST"], actual, whole=True) == (
        "TOPIC PARTITION EARLIEST"
    )
    assert first_missing(["orders 0"], actual, whole=True) == "orders 0"
    assert first_missing(["orders 0"], actual, whole=False) is None
    log = ["2024-05-01 12:00:00,101 INFO x: kafkette serve: cluster id AbC-1, node id 1"]
    assert first_missing(["kafkette serve: cluster id ..., node id 1"], log, whole=False) is None
    assert first_missing(["kafkette serve: cluster id ..., node"], log, whole=True) is not None
