"""The README's marked code blocks (`<!-- readme-NAME -->` before a fence), which the README and
Claude Code tests run as a user would type them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"<!-- (readme-[a-z-]+) -->\n```\w*\n(.*?)```", re.S)


def blocks(kind: str | None = None) -> list[tuple[str, str]]:
    """(name, body) of each marked block, in README order; only those named `kind` when given."""
    found = BLOCK.findall(README.read_text(encoding="utf-8"))
    return [(k, body) for k, body in found if kind is None or k == kind]
