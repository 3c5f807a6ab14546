"""The small repository most server tests search: a known number of `needle` lines. A module
of its own, not conftest.py, so tests that build more than the `code_tree` fixture's one tree
import it without importing conftest (which pytest loads as a plugin, not as a module)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def write_code_tree(root: Path, files: int = 12, hits_per_file: int = 20) -> Path:
    """A small repository with a known number of `needle` lines: files * hits_per_file."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        sub = root / ("pkg" if i % 2 else "lib") / f"mod{i:02d}.py"
        sub.parent.mkdir(parents=True, exist_ok=True)
        lines = [f'"""module {i}"""', ""]
        for j in range(hits_per_file):
            lines.append(f"def needle_{i}_{j}(x):  # needle {j}")
            lines.append(f"    return x + {j}")
        sub.write_text("\n".join(lines) + "\n")
    (root / "README.md").write_text("# demo\n\nno matches here\n")
    return root


def git_checkout(root: Path) -> Path:
    """`root`, made a git repository: `.gitignore` files apply only in one (as for rg and git)."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root
