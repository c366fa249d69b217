"""Every third-party module the package imports is declared in pyproject.toml.

The imports are read from the source with :mod:`ast` (not from a list kept by
hand) and the declarations from ``pyproject.toml``, mapped to module names
through the installed distributions' metadata. The rules:

- An import that runs when its module is imported (at module level, outside
  ``if TYPE_CHECKING:``) needs a base dependency, or, in a subpackage that
  belongs to an extra (``spark_integration`` to ``spark``), that extra's.
- An import inside a function runs only when that feature is used: it may
  take an extra's module if an ``except ImportError`` around it names the
  extra (``pip install kafkette[zstd]``), so a user learns what to install.
- trio is imported only inside functions called when the running event loop
  is trio's (anyio's other backend), so it is installed whenever it is reached.
- A module that only its host program loads may import that host: the pytest
  plugin (a ``pytest11`` entry point, imported by pytest alone) imports pytest.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kafkette"

SUBPACKAGE_EXTRAS = {"spark_integration": "spark", "otel": "otel"}
"""Subpackages that belong to an extra: their module-level imports may use it."""

RUNNING_EVENT_LOOP = frozenset({"trio"})
"""Modules imported lazily only when they are the running event loop's."""

HOST_LOADED = {"testing/pytest_plugin.py": frozenset({"pytest"})}
"""Modules (relative to the package) loaded only by a host program, and that host's
modules they may import: nothing in the package imports them."""


@attrs.frozen
class Import:
    """One import of a top-level module, where it is and how it runs."""

    module: str
    path: Path
    line: int
    lazy: bool  # inside a function: runs only when that function is called
    handler_text: str  # source of the enclosing ``except ImportError`` handlers


@attrs.frozen
class Finding:
    """An import that the declarations do not cover."""

    module: str
    path: Path
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module}: {self.why}"


def _normalize(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _normalize(match.group(1))


def declared_distributions(pyproject: Path) -> dict[str | None, frozenset[str]]:
    """Distribution names by extra (``None`` for the base dependencies)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    declared: dict[str | None, frozenset[str]] = {
        None: frozenset(map(_requirement_name, project.get("dependencies", [])))
    }
    for extra, requirements in project.get("optional-dependencies", {}).items():
        declared[extra] = frozenset(map(_requirement_name, requirements))
    return declared


def module_distributions() -> dict[str, frozenset[str]]:
    """The installed distributions that provide each top-level module."""
    return {
        module: frozenset(map(_normalize, distributions))
        for module, distributions in importlib.metadata.packages_distributions().items()
    }


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(kind, ast.Name) and kind.id in names for kind in kinds)


def imports_of(path: Path) -> Iterator[Import]:
    """The absolute imports in one source file, with how each runs."""
    source = path.read_text()
    tree = ast.parse(source, str(path))

    def visit(node: ast.AST, lazy: bool, handlers: str) -> Iterator[Import]:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from visit(child, lazy, handlers)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                yield Import(top, path, node.lineno, lazy, handlers)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield Import(node.module.partition(".")[0], path, node.lineno, lazy, handlers)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            lazy = True
        if isinstance(node, ast.Try):
            caught = " ".join(
                ast.get_source_segment(source, handler) or ""
                for handler in node.handlers
                if _catches_import_error(handler)
            )
            for child in node.body:
                yield from visit(child, lazy, f"{handlers} {caught}")
            for part in (node.handlers, node.orelse, node.finalbody):
                for child in part:
                    yield from visit(child, lazy, handlers)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, lazy, handlers)

    yield from visit(tree, False, "")


def undeclared_imports(
    package: Path,
    declared: Mapping[str | None, frozenset[str]],
    providers: Mapping[str, frozenset[str]],
    subpackage_extras: Mapping[str, str] = SUBPACKAGE_EXTRAS,
    host_loaded: Mapping[str, frozenset[str]] = HOST_LOADED,
) -> list[Finding]:
    """Every third-party import in ``package`` that ``declared`` does not cover."""
    local = package.name
    findings = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        own_extra = subpackage_extras.get(relative.parts[0]) if len(relative.parts) > 1 else None
        eager_allowed = declared[None] | (declared[own_extra] if own_extra else frozenset())
        for found in imports_of(path):
            if found.module == local or found.module in sys.stdlib_module_names:
                continue
            distributions = providers.get(found.module, frozenset())
            if distributions & eager_allowed:
                continue
            if found.lazy and found.module in RUNNING_EVENT_LOOP:
                continue
            if found.module in host_loaded.get(relative.as_posix(), frozenset()):
                continue
            extras = sorted(
                extra for extra, names in declared.items() if extra and distributions & names
            )
            if not extras:
                why = "no dependency or extra in pyproject.toml provides it"
            elif not found.lazy:
                why = f"imported when the module loads, but only the extra {extras} provides it"
            elif not any(f"kafkette[{extra}]" in found.handler_text for extra in extras):
                why = f"from the extra {extras}: catch ImportError and name the extra to install"
            else:
                continue
            findings.append(
                Finding(found.module, path.relative_to(package.parent), found.line, why)
            )
    return findings


def test_package_imports_only_declared_modules() -> None:
    """The package's third-party imports are all declared, eagerly or behind their extra."""
    declared = declared_distributions(ROOT / "pyproject.toml")
    findings = undeclared_imports(PACKAGE, declared, module_distributions())
    assert not findings, "\n".join(map(str, findings))


def _fake_package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    package = tmp_path / "kafkette"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return package


DECLARED = {None: frozenset({"anyio"}), "zstd": frozenset({"zstandard"})}
PROVIDERS = {
    "anyio": frozenset({"anyio"}),
    "zstandard": frozenset({"zstandard"}),
    "sniffio": frozenset({"sniffio"}),
}


def test_an_undeclared_import_is_reported(tmp_path: Path) -> None:
    """A module importing a package no declaration covers fails the check (sniffio, #15)."""
    package = _fake_package(
        tmp_path,
        {
            "__init__.py": "import anyio\nfrom kafkette import sub\n",
            "sub.py": "import os\nimport sniffio\n",
        },
    )
    findings = undeclared_imports(package, DECLARED, PROVIDERS)
    assert [(f.module, str(f.path), f.line) for f in findings] == [
        ("sniffio", "kafkette/sub.py", 2)
    ]
    assert findings[0].why == "no dependency or extra in pyproject.toml provides it"


def test_an_extra_needs_a_lazy_import_that_names_it(tmp_path: Path) -> None:
    """An extra's module at module level, or lazily without naming the extra, is reported."""
    package = _fake_package(
        tmp_path,
        {
            "eager.py": "import zstandard\n",
            "silent.py": "def f():\n    import zstandard\n",
            "named.py": """\
                def f():
                    try:
                        import zstandard
                    except ImportError:
                        raise RuntimeError("pip install kafkette[zstd]") from None
                """,
            "typing_only.py": "import typing\nif typing.TYPE_CHECKING:\n    import zz\n",
            "loop.py": "def f():\n    import trio\n",
        },
    )
    findings = undeclared_imports(package, DECLARED, PROVIDERS)
    assert {(f.module, str(f.path)): f.why for f in findings} == {
        ("zstandard", "kafkette/eager.py"): (
            "imported when the module loads, but only the extra ['zstd'] provides it"
        ),
        ("zstandard", "kafkette/silent.py"): (
            "from the extra ['zstd']: catch ImportError and name the extra to install"
        ),
    }


def test_a_subpackage_of_an_extra_may_import_it_at_module_level(tmp_path: Path) -> None:
    """spark_integration's modules may import the spark extra's packages when they load."""
    declared = {None: frozenset({"anyio"}), "spark": frozenset({"pyspark"})}
    providers = {"pyspark": frozenset({"pyspark"})}
    package = _fake_package(
        tmp_path,
        {"spark_integration/source.py": "import pyspark\n", "other.py": "import pyspark\n"},
    )
    findings = undeclared_imports(package, declared, providers)
    assert [(f.module, str(f.path)) for f in findings] == [("pyspark", "kafkette/other.py")]


def test_a_host_loaded_module_may_import_its_host_only(tmp_path: Path) -> None:
    """The pytest plugin may import pytest; no other module may, and the plugin no other."""
    package = _fake_package(
        tmp_path,
        {
            "testing/pytest_plugin.py": "import pytest\nimport sniffio\n",
            "testing/other.py": "import pytest\n",
        },
    )
    providers = {**PROVIDERS, "pytest": frozenset({"pytest"})}
    findings = undeclared_imports(package, DECLARED, providers)
    assert sorted((f.module, str(f.path)) for f in findings) == [
        ("pytest", "kafkette/testing/other.py"),
        ("sniffio", "kafkette/testing/pytest_plugin.py"),
    ]


def test_the_host_loaded_modules_are_not_imported_by_the_package() -> None:
    """The allowance holds only while nothing in the package imports those modules."""
    for relative in HOST_LOADED:
        module = "kafkette." + relative.removesuffix(".py").replace("/", ".")
        importers = []
        for path in sorted(PACKAGE.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = set()
                if isinstance(node, ast.Import):
                    names = {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
                if module in names:
                    importers.append(str(path.relative_to(ROOT)))
        assert importers == [], f"{module} is imported by {importers}"


def test_spark_integration_without_pyspark_names_the_extra() -> None:
    """Importing kafkette.spark_integration without pyspark says to install kafkette[spark]."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["pyspark"] = None  # as if it were not installed
        try:
            import kafkette.spark_integration
        except ImportError as error:
            print(error)
        else:
            print("imported")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "pip install kafkette[spark]" in result.stdout, result.stdout
