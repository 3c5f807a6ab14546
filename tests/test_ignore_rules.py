"""Which ignore files apply, as plain `rg` applies them, and answers that say what the rules
left out and how to search it, through the MCP tools (a real fastmcp Client in memory, real rg,
the shipped model)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from search_engine.regex.ripgrep import rg_path
from server.app import build_app
from tests.code_tree import git_checkout
from tests.server_helpers import make_settings, page_matches, structured

NEEDLE = "def find_the_needle():\n    return 'needle'\n"


def put(root: Path, rel: str, text: str = NEEDLE) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def rg_files(root: Path) -> list[str]:
    """What plain rg, run in `root` the way a person would, searches."""
    out = subprocess.run([rg_path(), "--no-config", "--files"], cwd=root, capture_output=True, text=True, check=False)
    return sorted(out.stdout.splitlines())


def warnings_of(body: dict[str, Any]) -> list[str]:
    warnings: list[str] = body["metadata"].get("warnings", [])
    return warnings


@pytest.fixture
def venv_package(tmp_path: Path) -> Path:
    """An installed package inside a virtual environment whose root `.gitignore` says `*`, as
    every uv environment and every `python3.13 -m venv` writes it; no git repository anywhere."""
    venv = tmp_path / "venv"
    put(venv, ".gitignore", "# created by virtualenv automatically\n*\n")
    package = venv / "lib" / "python3.13" / "site-packages" / "toolkit"
    put(package, "__init__.py")
    put(package, "core/engine.py")
    return package


@pytest.mark.slow
async def test_a_package_in_a_virtual_environment_is_searched_whole_as_rg_does(venv_package, tmp_path, model_cache):
    """`--no-require-git` applied the environment's `*` to everything under it: regex found 0
    matches, hybrid 0, index_status 0 files, where plain rg found them all. Outside a git
    repository no `.gitignore` applies now, as in rg and git."""
    assert rg_files(venv_package) == ["__init__.py", "core/engine.py"]
    settings = make_settings(venv_package, tmp_path, index={"cache_dir": model_cache, "ready_wait_s": 120})
    async with Client(build_app(settings)) as c:
        regex = structured(await c.call_tool("regex_search", {"pattern": "needle"}))
        assert sorted({m["path"] for m in page_matches(regex)}) == ["__init__.py", "core/engine.py"]
        hybrid = structured(await c.call_tool("hybrid_search", {"query": "find the needle"}))
        assert {m["path"] for m in page_matches(hybrid)} == {"__init__.py", "core/engine.py"}
        status = structured(await c.call_tool("index_status", {}))
        assert status["files"] == 2 and status["warnings"] == []
    for body in (regex, hybrid):
        assert warnings_of(body) == []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout whose top-level `.gitignore` ignores every `.py` file, searched from a
    package folder below its top."""
    top = git_checkout(tmp_path / "repo")
    put(top, ".gitignore", "*.py\n")
    put(top, "pkg/one.py")
    put(top, "pkg/two.py")
    put(top, "pkg/notes.md", "no code here\n")
    return top / "pkg"


async def test_a_search_that_meets_nothing_names_the_rule_and_how_to_search_past_it(repo, tmp_path):
    """Inside a repository, the `.gitignore` files from its top down apply, those above the root
    included (as in git and rg). When they leave out what was asked for, the answer names the
    file and the rule, and says how to take the files in; doing so finds them."""
    assert rg_files(repo) == ["notes.md"]
    async with Client(build_app(make_settings(repo, tmp_path))) as c:
        nothing = structured(await c.call_tool("regex_search", {"pattern": "needle"}))
        assert nothing["results"]["total_count"] == 0
        (notice,) = warnings_of(nothing)
        assert notice.startswith(
            f"2 files or folders were left out by ignore rules: 2 by {repo.parent}/.gitignore (*.py)."
        )
        assert 'pass include_patterns that name them (["*"]' in notice
        found = structured(await c.call_tool("regex_search", {"pattern": "needle", "include_patterns": ["*"]}))
    assert sorted({m["path"] for m in page_matches(found)}) == ["one.py", "two.py"]
    assert json.dumps(found).count(".gitignore") == 0  # nothing was left out by a rule this time


async def test_minified_files_left_out_are_counted_with_how_to_search_one(tmp_path):
    """Minified files (the default excludes) were left out without a word."""
    root = tmp_path / "web"
    put(root, "app.js", "const needle = 1;\n")
    put(root, "dist.min.js", "var needle=1;")
    put(root, "css/site.min.css", ".needle{}")
    async with Client(build_app(make_settings(root, tmp_path))) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "needle"}))
        assert [m["path"] for m in page_matches(body)] == ["app.js"]
        assert warnings_of(body) == [
            "2 minified files were left out (*.min.js, *.min.css, in the default excludes); "
            "to search one, pass it as path"
        ]
        named = structured(await c.call_tool("regex_search", {"pattern": "needle", "path": "dist.min.js"}))
    assert [m["path"] for m in page_matches(named)] == ["dist.min.js"]
