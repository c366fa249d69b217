"""The examples of README.md and docs/*.md run with the suite (tests/docs/examples.py).

pytest visits only tests/ (pyproject's testpaths), so this directory hands it the
documents: collecting this file yields one sybil collector per document, whose
items are the document's examples, ``README.md::line:N,column:1``. Both
``pytest`` (what scripts/test.sh runs) and ``pytest tests/docs`` collect them;
under pytest-xdist's ``--dist loadfile`` each document stays on one worker, its
examples in order, sharing one broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil.integration.pytest import SybilFile

from tests.docs.context import DocContext
from tests.docs.examples import CONTEXT, SYBIL, documents


class MarkdownDocuments(pytest.File):
    """README.md and docs/*.md, each a sybil collector of its examples."""

    def collect(self) -> Iterator[pytest.Collector]:
        for path in documents():
            yield SybilFile.from_parent(self, path=path, sybils=[SYBIL])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path == Path(__file__):
        return MarkdownDocuments.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="module", name=CONTEXT)
def docs_context(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DocContext]:
    """The shared state of one document's examples (module scope: per document)."""
    document = Path(request.node.path)
    docs = DocContext(document, tmp_path_factory.mktemp(document.stem))
    try:
        yield docs
    finally:
        docs.close()
