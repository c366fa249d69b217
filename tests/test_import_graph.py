"""No import cycle between the modules of the package.

The graph is read from the source with :mod:`ast`: an edge for every import
that runs, whether at module level or inside a function (a function-level
import that "breaks" a cycle still ties the two modules together). Imports
under ``if TYPE_CHECKING:`` are left out: they never run, and annotating a
handler with the :class:`~kafkette.server.broker.Broker` it is given is not a
dependency on the broker's module. They count in one check: only the edge
(handlers, the transport) is given the whole Broker, even as a type; the
broker's components are given the few things they use (docs/design.md).

``from package import name`` is an edge to ``package.name`` when that is a
module, else to ``package``; a relative import is resolved against the
importing module's package.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kafkette"


def module_names(package: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module under ``package``."""
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return hidden


def _imported(name: str, path: Path, node: ast.AST, modules: Mapping[str, Path]) -> Iterator[str]:
    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := known(alias.name)) is not None:
                yield target
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            target = submodule if submodule in modules else known(base)
            if target is not None:
                yield target


def import_graph(package: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports when its code runs (and, with
    ``type_checking``, those it imports for annotations only)."""
    modules = module_names(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        hidden = set() if type_checking else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) not in hidden:
                graph[name].update(_imported(name, path, node, modules))
        graph[name].discard(name)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _path_within(component: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """One cycle through the component's first module, for the failure message."""
    start = component[0]
    members = set(component)
    trail = [start]
    seen = {start}
    while True:
        here = trail[-1]
        if start in graph[here] and len(trail) > 1:
            return [*trail, start]
        nxt = next((t for t in sorted(graph[here]) if t in members and t not in seen), None)
        if nxt is None:
            return [*trail, "..."]
        trail.append(nxt)
        seen.add(nxt)


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 300  # the walk found the package
    found = cycles(graph)
    assert found == [], "\n".join(" -> ".join(_path_within(c, graph)) for c in found)


BROKER_MODULE = "kafkette.server.broker"
GIVEN_THE_BROKER = {
    "kafkette.server",  # the package exports it
    "kafkette.server.dispatch",  # a handler's signature
    "kafkette.server.net.frames",
    "kafkette.server.net.listener",
    "kafkette.server.net.asyncio_connection",
    "kafkette.server.net.socket_connection",
    "kafkette.cli.serve",
    "kafkette.client.inprocess",
}
"""Besides the handlers (``kafkette.server.handlers.*``) and kafkette.testing: the
modules that hold or are handed the whole Broker."""


def test_only_the_edge_imports_the_broker() -> None:
    """A server component is given what it uses, not the Broker (not even as a type):
    only the handlers, the transport and the test harness import its module."""
    graph = import_graph(PACKAGE, type_checking=True)
    importers = {name for name, targets in graph.items() if BROKER_MODULE in targets}
    others = {
        name
        for name in importers - GIVEN_THE_BROKER
        if not name.startswith(("kafkette.server.handlers", "kafkette.testing"))
    }
    assert others == set()
    assert "kafkette.server.handlers.produce" in importers  # the walk saw annotations


SERVER = "kafkette.server"
SERVER_ROOMS = (
    "net",
    "config",
    "faults",
    "data_dir",
    "kept_files",
    "handlers",
    "groups",
    "txn",
    "sasl",
    "acl",
    "metrics",
    "share",
)
"""The rooms of ``kafkette/server/``; its top-level modules are the core."""

MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset(
        {
            "config",
            "faults",
            "kept_files",
            "handlers",
            "groups",
            "txn",
            "sasl",
            "acl",
            "metrics",
            "share",
        }
    ),
    "net": frozenset(
        {"core", "config", "faults", "data_dir", "handlers", "sasl", "acl", "metrics"}
    ),
    "config": frozenset({"core", "groups", "sasl"}),
    "faults": frozenset({"acl"}),
    "data_dir": frozenset({"core"}),
    "kept_files": frozenset(),
    "handlers": frozenset(
        {"core", "config", "faults", "kept_files", "groups", "sasl", "acl", "metrics", "share"}
    ),
    "groups": frozenset({"core", "config"}),
    "txn": frozenset({"core", "groups"}),
    "sasl": frozenset(),
    "acl": frozenset(),
    "metrics": frozenset({"core", "config", "groups", "txn"}),
    "share": frozenset({"core", "config"}),
}
"""Which rooms of the server each room may import (annotations included), as each
room's docstring says. The network edge is imported by no other room."""

OUTSIDE_THE_SERVER = ("kafkette.cli.serve", "kafkette.client.inprocess", "kafkette.testing")
"""The only modules outside ``kafkette.server`` that may import it: the command, the
in-process transport and the test harness (and their submodules)."""

MAX_MODULES = 15
FLAT_BY_DESIGN = ("kafkette/server/handlers", "kafkette/protocol/messages")
"""One module per API, and the generated messages: folders of one kind of thing."""


def server_room(module: str) -> str | None:
    """The room of a ``kafkette.server`` module ("core" at the top), None outside it."""
    if module != SERVER and not module.startswith(SERVER + "."):
        return None
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[2] in SERVER_ROOMS else "core"


def room_violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import that crosses the server's rooms against :data:`MAY_IMPORT`, or
    reaches into the server from outside :data:`OUTSIDE_THE_SERVER`."""
    found = []
    for module, targets in sorted(graph.items()):
        here = server_room(module)
        for target in sorted(targets):
            there = server_room(target)
            if there is None or there == here:
                continue
            if here is None:
                allowed = module.startswith(OUTSIDE_THE_SERVER)
            else:
                allowed = there in MAY_IMPORT[here]
            if not allowed:
                found.append(f"{module} ({here or 'outside'}) -> {target} ({there})")
    return found


def test_the_server_rooms_import_only_what_their_rules_allow() -> None:
    graph = import_graph(PACKAGE, type_checking=True)
    assert {server_room(name) for name in graph} >= {"core", *SERVER_ROOMS}
    assert room_violations(graph) == []


def test_a_move_that_breaks_a_room_rule_is_caught() -> None:
    """The rules are not vacuous: frames moved into ``config`` (which may not import
    the handlers), or the authorizer importing the network edge, each fail."""
    graph = import_graph(PACKAGE, type_checking=True)

    def moved(old: str, new: str) -> dict[str, set[str]]:
        return {
            (new if name == old else name): {new if t == old else t for t in targets}
            for name, targets in graph.items()
        }

    frames_in_config = moved("kafkette.server.net.frames", "kafkette.server.config.frames")
    assert (
        "kafkette.server.config.frames (config) -> kafkette.server.handlers.api_versions (handlers)"
        in room_violations(frames_in_config)
    )
    reaching = {**graph, "kafkette.server.acl.authorizer": {"kafkette.server.net.listener"}}
    assert room_violations(reaching) == [
        "kafkette.server.acl.authorizer (acl) -> kafkette.server.net.listener (net)"
    ]
    from_producer = {**graph, "kafkette.producer.sender": {"kafkette.server.broker"}}
    assert room_violations(from_producer) == [
        "kafkette.producer.sender (outside) -> kafkette.server.broker (core)"
    ]


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    """A folder of more than 15 modules side by side is split into rooms (handlers/
    and the generated messages aside)."""
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if (count := len(list(folder.glob("*.py")))) > MAX_MODULES
        and str(folder.relative_to(PACKAGE.parent)) not in FLAT_BY_DESIGN
    }
    assert crowded == {}


def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_module_level_cycle_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import B\n",
            "b.py": "import pkg.c\n",
            "c.py": "from . import a\n",
            "d.py": "from pkg import a\n",
        },
    )
    assert cycles(import_graph(root)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_a_function_level_import_still_makes_a_cycle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "sub/__init__.py": "",
            "sub/a.py": "from ..b import thing\n",
            "b.py": "def thing():\n    from pkg.sub.a import other\n    return other\n",
        },
    )
    assert cycles(import_graph(root)) == [["pkg.b", "pkg.sub.a"]]


def test_type_checking_imports_are_not_edges(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import B\n",
            "b.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.a import A
                class B: ...
            """,
        },
    )
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.b"] == set()
    assert cycles(graph) == []
    assert import_graph(root, type_checking=True)["pkg.b"] == {"pkg.a"}
