"""How the examples of README.md and docs/*.md run: sybil's Markdown parsers with our
evaluators.

- ```python blocks run in one namespace per document, in order. The address
  ``localhost:9092`` in them stands for the document's broker (see
  :class:`~tests.docs.context.DocContext`). A block that defines tests (``def
  test_...``, a ``unittest.TestCase``) is a test module for the reader to save:
  it runs as one, under pytest with kafkette's plugin (in this process, with a
  pytest.ini of its own), and each of its tests must pass.
- ```bash, ```sh and ```console blocks run as tests/docs/shell.py describes.
- ``<!-- skip: next "why" -->`` (sybil's) leaves out the next block, saying why.
- ``<!-- test-setup: NAME -->`` runs the set-up ``NAME`` of tests/docs/setups.py:
  the topics, records or files the next examples assume, made by the test.
- ```text blocks (diagrams, usage lines, output not tied to a command) are read,
  not run; tests/docs/test_fences.py checks that every block says which it is.
"""

from __future__ import annotations

import ast
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer

from tests.docs.context import DocContext
from tests.docs.setups import SETUPS
from tests.docs.shell import parse_block

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "kafkette_docs"
"""The fixture (and namespace name) of a document's :class:`DocContext`."""
SHELLS = ("bash", "sh", "console")
"""Languages of the blocks run as shell examples."""

_NESTED_INI = """\
[pytest]
filterwarnings = error
asyncio_default_fixture_loop_scope = function
"""


def documents() -> list[Path]:
    """The Markdown files whose examples run: README.md and docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def context(example: Example) -> DocContext:
    found = example.namespace[CONTEXT]
    assert isinstance(found, DocContext)
    return found


def run_python(example: Example) -> None:
    """Run a Python block in its document's namespace (or as a test module)."""
    __tracebackhide__ = True
    docs = context(example)
    source = docs.substitute(str(example.parsed))
    fence = example.line + example.parsed.line_offset  # the block's first line follows
    if defines_tests(source):
        run_test_module(docs, Path(example.path), fence, source)
        return
    code = compile(pad(source, fence), example.path, "exec", dont_inherit=True)
    exec(code, example.namespace)
    example.namespace.pop("__builtins__", None)


def defines_tests(source: str) -> bool:
    """Whether a block defines test functions or classes, at the top level."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test"):
                return True
        elif isinstance(node, ast.ClassDef):
            bases = [getattr(base, "attr", getattr(base, "id", "")) for base in node.bases]
            if node.name.startswith("Test") or "TestCase" in bases:
                return True
    return False


class _Outcomes:
    """A plugin of the inner pytest run: which tests passed, what failed and how."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failures: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.passed.append(report.nodeid)
        elif report.failed:
            self.failures.append(f"{report.nodeid} ({report.when}):\n{report.longreprtext}")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failures.append(f"collecting {report.nodeid}:\n{report.longreprtext}")


def run_test_module(docs: DocContext, document: Path, fence: int, source: str) -> None:
    """Save a block (whose fence is line ``fence``) as a test module and run it under
    pytest, as the reader would; padded so that its line numbers are the document's."""
    __tracebackhide__ = True
    name = f"test_{document.stem.replace('-', '_')}_line{fence}"
    directory = docs.work / name
    directory.mkdir()
    (directory / f"{name}.py").write_text(pad(source, fence))
    (directory / "pytest.ini").write_text(_NESTED_INI)
    outcomes = _Outcomes()
    saved_path = list(sys.path)
    try:
        with warnings.catch_warnings():  # the inner run applies its own filters
            warnings.simplefilter("default")
            status = pytest.main(
                [
                    str(directory),
                    f"--rootdir={directory}",
                    f"--basetemp={directory / 'tmp'}",
                    "-p",
                    "no:cacheprovider",
                    "-q",
                ],
                plugins=[outcomes],
            )
    finally:
        sys.path[:] = saved_path
        sys.modules.pop(name, None)
    if status != 0 or outcomes.failures or not outcomes.passed:
        failures = "\n".join(outcomes.failures) or "no test ran"
        raise AssertionError(
            f"{document.name} line {fence}: the block's tests under pytest "
            f"(exit status {status}):\n{failures}"
        )


def run_shell(example: Example) -> None:
    """Run a shell block's commands in order (see tests/docs/shell.py)."""
    __tracebackhide__ = True
    docs = context(example)
    console = example.region.lexemes.get("arguments") == "console"
    first_line = example.line + example.parsed.line_offset + 1
    for command in parse_block(str(example.parsed), first_line, console=console):
        docs.run(command)


def run_setup(example: Example) -> None:
    """Make the state a ``<!-- test-setup: NAME -->`` names (undoing the previous one's)."""
    docs = context(example)
    name = str(example.parsed)
    if name not in SETUPS:
        raise ValueError(f"no set-up {name!r} in tests/docs/setups.py")
    docs.clean_up()
    SETUPS[name](docs)


class SetupParser:
    """``<!-- test-setup: NAME -->`` directives."""

    def __init__(self) -> None:
        self.lexer = DirectiveInHTMLCommentLexer(directive="test-setup", arguments=r"[\w-]+")

    def __call__(self, document: Document) -> Iterable[Region]:
        for lexed in self.lexer(document):
            yield Region(lexed.start, lexed.end, lexed.lexemes["arguments"], run_setup)


class PythonBlocks(PythonCodeBlockParser):
    """sybil's Python code blocks (and doctests), run by :func:`run_python`."""

    def __init__(self) -> None:
        super().__init__()
        self.codeblock_parser = CodeBlockParser("python", run_python)


SYBIL = Sybil(
    parsers=[
        SkipParser(),
        SetupParser(),
        PythonBlocks(),
        *(CodeBlockParser(language, run_shell) for language in SHELLS),
    ],
    fixtures=[CONTEXT],
)
