"""What a file's path says about how likely it is to be the answer, before reading it.

Someone asking where something is done wants the implementation: a test exercising it, a
vendored or compatibility copy, an example, a package `__init__.py` that only re-exports it or
a prose page describing it all share its words and would crowd it out. Each such kind of path
scales a hybrid score down by a factor; none removes a result. When the query itself asks
for that kind of file ("tests for the retry logic", "README"), its penalty is lifted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

_TEST_PATH_RE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec|specs|testing)(?:/|$)"
    r"|(?:^|/)(?:test_[^/]*|[^/]*_test|[^/]*_spec|[^/]*\.(?:test|spec)|conftest)\.\w+$"
    r"|(?:^|/)[^/]*(?:Tests?|Spec)\.(?:java|kt|cs|swift|scala|php)$"
)
_SHIM_DIR_RE = re.compile(r"(?:^|/)(?:_?compat|legacy|deprecated|_?vendor(?:ed)?|third_party)(?:/|$)")
_EXAMPLE_DIR_RE = re.compile(r"(?:^|/)(?:_?examples?|samples?|demos?|docs_src)(?:/|$)")
_REEXPORT_NAMES = frozenset({"__init__.py", "package-info.java"})
PROSE_LANGUAGES = frozenset({"markdown", "rst", "text", "asciidoc"})

_ASKS_FOR_TESTS_RE = re.compile(r"\b(?:tests?|testing|specs?|fixtures?|conftest)\b", re.IGNORECASE)
_ASKS_FOR_DOCS_RE = re.compile(r"\b(?:docs?|documentation|readme|guide|tutorial|changelog)\b", re.IGNORECASE)
_ASKS_FOR_EXAMPLES_RE = re.compile(r"\b(?:examples?|samples?|demos?|usage)\b", re.IGNORECASE)

TEST_FACTOR = 0.3
SHIM_FACTOR = 0.3
EXAMPLE_FACTOR = 0.3
REEXPORT_FACTOR = 0.5
PROSE_FACTOR = 0.5


@dataclass(frozen=True, slots=True)
class PathPriors:
    """The penalties that apply to one query (some are lifted by what it asks for)."""

    tests: bool = True
    prose: bool = True
    examples: bool = True

    @classmethod
    def for_query(cls, query: str) -> PathPriors:
        return cls(
            tests=not _ASKS_FOR_TESTS_RE.search(query),
            prose=not _ASKS_FOR_DOCS_RE.search(query),
            examples=not _ASKS_FOR_EXAMPLES_RE.search(query),
        )

    def factor(self, path: str, language: str | None) -> float:
        kinds = _path_kinds(path, language)
        f = 1.0
        if "test" in kinds and self.tests:
            f *= TEST_FACTOR
        if "prose" in kinds and self.prose:
            f *= PROSE_FACTOR
        if "example" in kinds and self.examples:
            f *= EXAMPLE_FACTOR
        if "shim" in kinds:
            f *= SHIM_FACTOR
        if "reexport" in kinds:
            f *= REEXPORT_FACTOR
        return f


@lru_cache(maxsize=65536)
def _path_kinds(path: str, language: str | None) -> frozenset[str]:
    kinds = set()
    if _TEST_PATH_RE.search(path):
        kinds.add("test")
    if _SHIM_DIR_RE.search(path):
        kinds.add("shim")
    if _EXAMPLE_DIR_RE.search(path):
        kinds.add("example")
    if PurePosixPath(path).name in _REEXPORT_NAMES:
        kinds.add("reexport")
    if language in PROSE_LANGUAGES:
        kinds.add("prose")
    return frozenset(kinds)
