"""Test modules stand alone: none imports another test module or conftest.py (shared code lives
in helper modules), benchmarks/ and harness/ import nothing from tests/, and the product's
packages are used only through their public names. Read from the source's import statements,
so a new import that breaks a rule fails here by name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Every absolute module `path` imports (`from a.b import c` counts as a.b and a.b.c)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_test_module_imports_another_or_conftest() -> None:
    offenders = {
        path.name: sorted(
            m for m in imported_modules(path) if m.startswith(("tests.test_", "tests.conftest")) or m == "conftest"
        )
        for path in sorted((ROOT / "tests").glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_benchmarks_and_harness_import_nothing_from_tests() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m == "tests" or m.startswith("tests."))
        for folder in ("benchmarks", "harness")
        for path in sorted((ROOT / folder).glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


#: Packages whose users import only the names in their `__init__`'s `__all__`, never a module.
SEALED = ("infra", "search_engine", "sessions", "server.output", "server.sql", "server.jq")


def test_packages_are_used_through_their_public_names() -> None:
    """A module outside a sealed package imports the package, not its modules (`server` ->
    `sessions` -> `search_engine`; the proxy and tools -> output, sql and jq), so a package can
    move its modules without touching its users."""

    def package_of(path: Path) -> str:
        return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])

    offenders = {}
    for folder in ("infra", "search_engine", "sessions", "server"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            home = package_of(path)
            reached = sorted(
                m
                for m in imported_modules(path)
                for sealed in SEALED
                if m.startswith(sealed + ".")
                and m.split(".")[sealed.count(".") + 1] in _modules_of(sealed)
                and not (home + ".").startswith(sealed + ".")
            )
            if reached:
                offenders[str(path.relative_to(ROOT))] = reached
    assert offenders == {}


def _modules_of(package: str) -> set[str]:
    """The module and subpackage names directly inside `package`."""
    folder = ROOT.joinpath(*package.split("."))
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").is_file()
    }


#: The layers, each allowed to import only those after it: `server -> sessions -> search_engine`,
#: and all three build on `infra`.
LAYERS = ("server", "sessions", "search_engine", "infra")


def test_imports_flow_one_way() -> None:
    """No layer imports one above it (the engine knows nothing of sessions or MCP; infra nothing
    of any of them), read from every import statement, lazy ones inside functions included."""
    offenders = {}
    for rank, layer in enumerate(LAYERS):
        above = LAYERS[:rank]
        for path in sorted((ROOT / layer).rglob("*.py")):
            wrong = sorted(m for m in imported_modules(path) if m.split(".")[0] in above)
            if wrong:
                offenders[str(path.relative_to(ROOT))] = wrong
    assert offenders == {}


def test_the_engine_is_grouped_by_stage() -> None:
    """At most 12 modules at the engine's top: the rest live in a sub-package per stage."""
    top = sorted(p.stem for p in (ROOT / "search_engine").glob("*.py") if p.stem != "__init__")
    assert len(top) <= 12, top


def test_the_server_reaches_indexes_only_through_the_engine() -> None:
    """The server builds and reports on indexes through `SearchEngine` (`prepare_index`,
    `update_index`, `index_status`), never its per-root index cache: no `.indexes` attribute and
    no `IndexManager` anywhere in server/, so the engine can change how it keeps indexes without
    touching the server."""
    offenders = {}
    for path in sorted((ROOT / "server").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = sorted({named for node in ast.walk(tree) for named in _index_cache_names(node)})
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def _index_cache_names(node: ast.AST) -> list[str]:
    """Where `node` names the engine's index cache (`x.indexes`, or `IndexManager` as a name, an
    attribute or an imported name), with its line."""
    if isinstance(node, ast.Attribute) and node.attr in ("indexes", "IndexManager"):
        return [f"line {node.lineno}: .{node.attr}"]
    if isinstance(node, ast.Name) and node.id == "IndexManager":
        return [f"line {node.lineno}: {node.id}"]
    if isinstance(node, ast.ImportFrom | ast.Import):
        return [f"line {node.lineno}: {a.name}" for a in node.names if a.name.split(".")[-1] == "IndexManager"]
    return []
