"""The package layers of `charter`, read from the source: no import runs back up, none
forms a cycle.

Every import counts, including those inside functions (deferred to keep start-up fast)
and under TYPE_CHECKING: a deferred import is still a dependency. docs/architecture.md
draws the same layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC / "charter"

# Bottom first. A package may import packages of lower layers only; packages of one
# layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "tracing", "logs", "deadline", "console"),
    ("wire",),
    ("db", "dsl", "sdk", "apidocs"),
    ("engine", "tlog", "auth", "demo"),
    ("audit", "firing", "automations", "operator", "witness", "lifecycle"),
    ("api", "machine", "testing", "archive"),
    ("cli",),
    ("__main__",),
)
# (importer, imported) edges that break the order today, each to be removed: the test
# fails when one is gone from the code, so the list only shrinks.
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(path): path for path in ROOT.rglob("*.py")}


def _imports(path: Path) -> Iterator[str]:
    """The charter modules `path` imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from pkg import module` names a module; `from module import name` does not.
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
            if node.module == "charter" and all(a.name == "__version__" for a in node.names):
                continue  # the version string: a constant of the root, not its SDK
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("charter.") or name == "charter":
                yield name


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULE_EDGES: dict[str, set[str]] = {
    module: {target for target in _imports(path) if target != module}
    for module, path in MODULES.items()
}
PACKAGE_EDGES: set[tuple[str, str]] = {
    (_package(module), _package(target))
    for module, targets in MODULE_EDGES.items()
    for target in targets
    if _package(module) and _package(target) and _package(module) != _package(target)
}
LAYER_OF = {package: index for index, layer in enumerate(LAYERS) for package in layer}


def test_every_package_has_a_layer() -> None:
    packages = {_package(module) for module in MODULES} - {""}
    assert packages - set(LAYER_OF) == set(), "give each new package a layer in LAYERS"
    assert set(LAYER_OF) - packages == set(), "LAYERS names a package that is gone"


def test_no_import_runs_against_the_layer_order() -> None:
    against = {
        (importer, imported)
        for importer, imported in PACKAGE_EDGES
        if LAYER_OF[imported] >= LAYER_OF[importer]
    }
    assert against - KNOWN_EXCEPTIONS == set()


def test_the_known_exceptions_still_exist() -> None:
    # A fixed exception leaves the list, so that it cannot come back unnoticed.
    assert set() == KNOWN_EXCEPTIONS - PACKAGE_EDGES


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    # The root package imports the SDK lazily for `charter.Client`: it is the public
    # surface on top of everything, not a module the others stand on.
    edges = {m: t - {"charter"} for m, t in MODULE_EDGES.items() if m != "charter"}
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# Scenario tests (docs/testing.md) are a tool for people who test workflows: Charter itself
# never stands on them, so only the command line may import the package.
TESTING_IMPORTERS = frozenset({"cli", "testing"})


def test_only_the_command_line_imports_the_scenario_tests() -> None:
    importers = {importer for importer, imported in PACKAGE_EDGES if imported == "testing"}
    assert importers, "the command line runs scenario files"
    assert importers <= TESTING_IMPORTERS


# The packages whose modules never run SQL of their own: they call the stores below.
WITHOUT_SQL = (
    "api", "cli", "sdk", "machine", "dsl", "core", "witness", "demo", "apidocs", "testing",
)  # fmt: skip


def test_routes_commands_and_clients_run_no_sql_of_their_own() -> None:
    running = sorted(
        module
        for module, targets in MODULE_EDGES.items()
        if _package(module) in WITHOUT_SQL and "charter.db.queries" in targets
    )
    assert running == []
