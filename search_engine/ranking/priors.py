"""What a file's path says about how likely it is to be the answer, before reading it.

Someone asking where something is done wants the implementation: a test exercising it, a
vendored or compatibility copy, an example, a benchmark or helper script, a package
`__init__.py` that only re-exports it, a prose page describing it, a config or data file or a
generated one naming it all share its words and would crowd it out. Each such kind of path
scales a score down by a factor; none removes a result. When the query itself asks for that
kind of file ("tests for the retry logic", "the README"), its penalty is lifted.

Docs are asked for by the *kind* of document ("README", "changelog", "guide", "tutorial"), not
by topic words: "markdown rendering" or "documentation generator" describe a feature of the
code, and lifting the prose penalty for them let pages about the feature outrank it.

A cross-platform project keeps ports beside its main implementation (libuv's `src/win/tcp.c`
beside `src/unix/tcp.c`, Go's `file_windows.go`, `os390.c`, `aix.c`): a question that names no
platform is about the implementation most readers mean, so files of a port rank a little below
it, until the query names a platform.

A `v1/` folder whose files also stand one level up (`pydantic/v1/fields.py` beside
`pydantic/fields.py`) is the first version of an API kept for compatibility, a shim like
`compat/`, unless the query says "v1". Only `v1`: Go puts a new major version in `v2/` beside
the old root, so a higher number may well be the current code.

A project whose root is itself a package (a manifest and a `lib/` or `src/` at the top) may
carry sibling packages in top-level folders with a manifest and a `lib/` or `src/` of their
own: a contrib collection, a plugin, an installer (sinatra's `rack-protection/` and
`sinatra-contrib/`, phoenix's `installer/`). They share the project's vocabulary, and a
question about the project is about its root package, so they are scaled down too, unless the
query names one (every word of its folder name: "rack protection"). A workspace whose root is
no package (tokio, serde, a `packages/*` monorepo) has no such centre, and nothing is scaled.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from search_engine.files.languages import FileKind, file_kind, language_for
from search_engine.ranking.rules import ALL_ON, RankingRules

_TEST_PATH_RE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec|specs|testing)(?:/|$)"
    r"|(?:^|/)(?:test_[^/]*|[^/]*_test|[^/]*_spec|[^/]*\.(?:test|spec)|conftest)\.\w+$"
    r"|(?:^|/)[^/]*(?:Tests?|Spec)\.(?:java|kt|cs|swift|scala|php)$"
)
_SHIM_DIR_RE = re.compile(r"(?:^|/)(?:_?compat|legacy|deprecated|_?vendor(?:ed)?|third_party)(?:/|$)")
_EXAMPLE_DIR_RE = re.compile(r"(?:^|/)(?:_?examples?|samples?|demos?|docs_src)(?:/|$)")
# Code under a docs folder (`docs/code/tcp-echo-server/main.c`) is a sample, like an example,
# when the folder is documentation: more of its files are pages (prose, or HTML and CSS) than
# source. A `doc/` folder of source files (cobra's man-page and Markdown generators, tokio's
# `src/doc/` module) is code like any other (`source_folders`).
_DOCS_DIR_RE = re.compile(r"(?:^|/)(?:docs?|documentation|www)(?:/|$)")
_PAGE_LANGUAGES = frozenset({"html", "css"})
_NONE: frozenset[str] = frozenset()
_TOOLING_DIR_RE = re.compile(r"(?:^|/)(?:bench|benches|benchmarks?|scripts?|perf)(?:/|$)")
# Build scripts and package manifests written in a code language (`Rakefile`, `setup.py`,
# `build.gradle`, `vite.config.ts`): they name every part of the project and implement none.
_BUILD_FILE_RE = re.compile(
    r"(?:^|/)(?:rakefile|gemfile|[^/]*\.gemspec|mix\.exs|build\.gradle(?:\.kts)?|settings\.gradle(?:\.kts)?"
    r"|(?:gulp|grunt|jake)file\.\w+|setup\.py|noxfile\.py|build\.rs|[^/]*\.config\.(?:js|cjs|mjs|ts|cts|mts))$",
    re.IGNORECASE,
)
# Platforms a port is for, and a folder or file name part naming one: `win/`, `win32.c`,
# `fs_windows.go`, `os390.c`.
_PLATFORMS = "win|win32|win64|windows|os390|zos|aix|sunos|solaris|ibmi|cygwin|haiku|qnx|hurd|plan9|illumos"
_PLATFORM_RE = re.compile(rf"(?:^|/|[_.-])(?:{_PLATFORMS})(?:/|[_.-][^/]*$)", re.IGNORECASE)
_REEXPORT_NAMES = frozenset({"__init__.py", "package-info.java", "mod.ts", "index.ts", "index.js"})

_ASKS_FOR_TESTS_RE = re.compile(r"\b(?:tests?|testing|specs?|fixtures?|conftest)\b", re.IGNORECASE)
# A query naming a file by a docs or config extension (`util/helpers.md`, `ci.yml`) asks for that
# kind of file as plainly as one saying "README".
_ASKS_FOR_DOCS_RE = re.compile(
    r"\b(?:readme|changelog|change\s+log|release\s+notes|guides?|tutorials?|faq|cheat\s*sheet|licen[cs]e)\b"
    r"|\.(?:md|mdx|markdown|rst|adoc|txt)\b",
    re.IGNORECASE,
)
_ASKS_FOR_EXAMPLES_RE = re.compile(r"\b(?:examples?|samples?|demos?|usage)\b", re.IGNORECASE)
_ASKS_FOR_TOOLING_RE = re.compile(
    r"\b(?:bench(?:mark)?s?|benchmarking|scripts?|perf|performance|rake|gradle|gemspec|build\s+(?:scripts?|files?|tasks?))\b",
    re.IGNORECASE,
)
_ASKS_FOR_DECLARATIONS_RE = re.compile(r"\b(?:headers?|declarations?|declared|prototypes?)\b", re.IGNORECASE)
_ASKS_FOR_PLATFORM_RE = re.compile(rf"\b(?:{_PLATFORMS}|z/os|platforms?)\b", re.IGNORECASE)
_ASKS_FOR_FIRST_VERSION_RE = re.compile(r"\bv1\b", re.IGNORECASE)
_ASKS_FOR_TEMPLATES_RE = re.compile(r"\btemplates?\b", re.IGNORECASE)
_ASKS_FOR_CONFIG_RE = re.compile(
    r"\b(?:config(?:uration)?|settings|manifest|dependenc(?:y|ies)|ci|workflow)\b|\.(?:json|ya?ml|toml|ini|cfg)\b",
    re.IGNORECASE,
)

TEST_FACTOR = 0.3
SHIM_FACTOR = 0.3
EXAMPLE_FACTOR = 0.3
TOOLING_FACTOR = 0.3
REEXPORT_FACTOR = 0.5
PROSE_FACTOR = 0.3
CONFIG_FACTOR = 0.3
DATA_FACTOR = 0.3
GENERATED_FACTOR = 0.2
TEMPLATE_FACTOR = 0.5
DECLARATION_FACTOR = 0.5
PLATFORM_FACTOR = 0.7
SATELLITE_FACTOR = 0.5
# A C/C++ header next to its own implementation (`src/idna.h` beside `src/idna.c`) declares
# what the source file does: the source is the answer, unless the header is where the authors
# explain it (more documented declarations than the source: `documented_headers`). A header with
# no such sibling (a header-only library's `include/fmt/format.h`, a public `include/uv.h`)
# keeps full weight.
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx")
_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".m", ".mm")
# What makes a folder a package of its own (see the module doc): a manifest beside a source folder.
_MANIFEST_RE = re.compile(
    r"^(?:[^/]*\.gemspec|mix\.exs|package\.json|Cargo\.toml|pom\.xml|pyproject\.toml|setup\.py|go\.mod"
    r"|build\.gradle(?:\.kts)?|composer\.json|[^/]*\.cabal|Package\.swift)$"
)
_SOURCE_DIRS = frozenset({"lib", "src"})
_V1_RE = re.compile(r"^(?P<parent>(?:.*/)?)v1/(?P<rest>.+)$")
# A `v1/` folder counts as a kept first version once this many of its files have a twin above.
_MIN_V1_TWINS = 3
_WORD_RE = re.compile(r"[a-z0-9]+")


# What a query says to ask for a kind of file, lifting that kind's penalty.
_ASKS_FOR = (
    ("test", _ASKS_FOR_TESTS_RE),
    ("prose", _ASKS_FOR_DOCS_RE),
    ("example", _ASKS_FOR_EXAMPLES_RE),
    ("tooling", _ASKS_FOR_TOOLING_RE),
    ("config", _ASKS_FOR_CONFIG_RE),
    ("template", _ASKS_FOR_TEMPLATES_RE),
    ("declaration", _ASKS_FOR_DECLARATIONS_RE),
    ("platform", _ASKS_FOR_PLATFORM_RE),
    ("first_version", _ASKS_FOR_FIRST_VERSION_RE),
)
# Each kind of path and its factor; a kind no query can ask for (data, generated, shims and
# re-exports, satellites unless named) is never lifted.
_PENALTIES = {
    "test": TEST_FACTOR,
    "prose": PROSE_FACTOR,
    "example": EXAMPLE_FACTOR,
    "tooling": TOOLING_FACTOR,
    "config": CONFIG_FACTOR,
    "template": TEMPLATE_FACTOR,
    "data": DATA_FACTOR,
    "generated": GENERATED_FACTOR,
    "shim": SHIM_FACTOR,
    "reexport": REEXPORT_FACTOR,
    "declaration": DECLARATION_FACTOR,
    "platform": PLATFORM_FACTOR,
    "satellite": SATELLITE_FACTOR,
}
# Evidence that makes a file another kind's: code under a docs folder is an example, a build
# file tooling, a kept first version a shim (each its own rule, see `RankingRules`).
_KIND_OF = {"docs_code": "example", "build_file": "tooling", "kept_version": "shim"}


def _off(rules: RankingRules) -> frozenset[str]:
    """The kinds and evidence `rules` switch off."""
    switches = (
        ("test", rules.test_files),
        ("shim", rules.shims),
        ("example", rules.examples),
        ("docs_code", rules.code_under_docs),
        ("tooling", rules.tooling),
        ("build_file", rules.build_files),
        ("reexport", rules.reexports),
        ("prose", rules.prose),
        ("config", rules.config),
        ("data", rules.data),
        ("generated", rules.generated),
        ("template", rules.templates),
        ("declaration", rules.implemented_headers),
        ("platform", rules.platform_ports),
        ("satellite", rules.satellites),
        ("kept_version", rules.first_versions),
    )
    return frozenset(kind for kind, on in switches if not on)


@dataclass(frozen=True, slots=True)
class PathPriors:
    """The penalties that apply to one query: `lifted` are the kinds of file it asks for
    (`_ASKS_FOR`), `named_satellites` the satellite packages (see the module doc) it names,
    `off` the kinds and evidence the ranking rules switch off (`RankingRules`)."""

    lifted: frozenset[str] = frozenset()
    named_satellites: frozenset[str] = frozenset()
    off: frozenset[str] = frozenset()

    @classmethod
    def for_query(
        cls,
        query: str,
        satellites: Mapping[str, frozenset[str]] | None = None,
        rules: RankingRules = ALL_ON,
        names_things: Callable[[str], bool] | None = None,
    ) -> PathPriors:
        """The priors of `query` over an index whose satellite packages are `satellites` (folder
        -> the words of its name, from `satellite_packages`), under `rules`. `names_things`
        says whether a word names things in this codebase (`Corpus.names_things`): such a
        word does not ask for tests ("spec" in a spec validator, "test" in a test runner)."""
        words = set(_WORD_RE.findall(query.lower()))
        asks = _ASKS_FOR if rules.query_lifts else ()
        domain = names_things if rules.codebase_words else None

        def asked(kind: str, pattern: re.Pattern[str]) -> bool:
            if kind != "test" or domain is None:
                return pattern.search(query) is not None
            return any(not domain(m.group().lower()) for m in pattern.finditer(query))

        return cls(
            lifted=frozenset(kind for kind, pattern in asks if asked(kind, pattern)),
            named_satellites=frozenset(f for f, name in (satellites or {}).items() if name <= words),
            off=_off(rules),
        )

    def factors(
        self, paths: Sequence[str], languages: Sequence[str | None], tree: TreeFacts | None = None
    ) -> list[float]:
        """`factor` of every file of one index, which also knows each file's siblings (`tree`,
        found from `paths` when not given)."""
        tree = TreeFacts.of(paths) if tree is None else tree
        scaled = set(tree.satellites) - self.named_satellites
        kept = () if "first_version" in self.lifted else tree.kept_versions
        return [
            self.factor(
                p,
                lang,
                p in tree.implemented and p not in tree.documented,
                p.split("/", 1)[0] in scaled,
                p.startswith(kept) if kept else False,
                tree.disproved(p),
            )
            for p, lang in zip(paths, languages, strict=True)
        ]

    def factor(
        self,
        path: str,
        language: str | None,
        implemented: bool = False,
        satellite: bool = False,
        kept_version: bool = False,
        disproved: frozenset[str] = frozenset(),
    ) -> float:
        """The factor of one file; `implemented` says it is a header whose source file sits
        beside it and documents at least as much (see `implemented_headers`), `satellite` that
        it lies in a satellite package the query does not name (see `satellite_packages`),
        `kept_version` in a kept first version (`kept_first_versions`), scaled as a shim;
        `disproved`: the kinds its path suggests that its code, or its folder's, shows it is
        not (`TreeFacts.disproved`)."""
        found = (_path_kinds(path, language) - disproved) | ({"declaration"} if implemented else set())
        found |= {"satellite"} if satellite else set()
        found |= {"kept_version"} if kept_version else set()
        kinds = {_KIND_OF.get(k, k) for k in found if k not in self.off} - self.off
        # In the table's order, so the product is the same float in every process.
        return math.prod(f for kind, f in _PENALTIES.items() if kind in kinds and kind not in self.lifted)


@dataclass(frozen=True, slots=True)
class TreeFacts:
    """What the priors read from an index's files as a whole, the same for every query: the
    headers with a source file beside them (`implemented_headers`) and those of them that hold
    the documentation (`documented_headers`), the kept first versions (`kept_first_versions`),
    the satellite packages (`satellite_packages`), the docs-named folders of source files
    (`source_folders`) and the files named as re-exports that define code (`defining`). Found
    once per index, not once per variant of the priors."""

    implemented: frozenset[str]
    documented: frozenset[str]
    kept_versions: tuple[str, ...]
    satellites: Mapping[str, frozenset[str]]
    source_folders: tuple[str, ...]
    defining: frozenset[str]

    def beside(
        self,
        live: Sequence[str],
        present: Callable[[str], bool],
        documented: Callable[[str], int],
        defines: Callable[[str], bool],
    ) -> TreeFacts:
        """These facts with the `live` files (changed files taken as they are now, beside the
        index's: `search_engine.live.layer`) judged again, so a search before the next fold
        ranks them as a fresh index would: a re-export name that now defines code, a header
        or source whose pair's documentation moved (`present`: whether a path is a file now;
        `documented`, `defines`: as for `of`). Folder-wide facts (source folders, satellites,
        kept versions) wait for the fold."""
        implemented, documented_set, defining = set(self.implemented), set(self.documented), set(self.defining)
        for path in live:
            if PurePosixPath(path).name in _REEXPORT_NAMES:
                (defining.add if defines(path) else defining.discard)(path)
            pair = _pair_of(path, present)
            if pair is not None:
                header, source = pair
                implemented.add(header)
                more = documented(header) > documented(source)
                (documented_set.add if more else documented_set.discard)(header)
        judged = (frozenset(implemented), frozenset(documented_set), frozenset(defining))
        if judged == (self.implemented, self.documented, self.defining):
            return self
        return dataclasses.replace(self, implemented=judged[0], documented=judged[1], defining=judged[2])

    def disproved(self, path: str) -> frozenset[str]:
        """The kinds `path`'s name suggests that the code shows it is not: code in a docs-named
        folder of source files is no sample (`source_folders`), a file named as a re-export
        (`__init__.py`, `index.ts`) that defines functions or classes is no mere re-export
        (`defining`). Asked once per file and variant of the priors: most files get the one
        empty set."""
        docs = bool(self.source_folders) and path.startswith(self.source_folders)
        reexport = path in self.defining
        if not (docs or reexport):
            return _NONE
        return frozenset(("docs_code",) * docs + ("reexport",) * reexport)

    @classmethod
    def of(
        cls,
        paths: Sequence[str],
        documented: Callable[[str], int] | None = None,
        defines: Callable[[str], bool] | None = None,
    ) -> TreeFacts:
        """The facts of the files `paths`; `documented` counts a file's documented declarations
        (see `documented_headers`; None: no header counts as documented), `defines` says
        whether a file defines a function or class (None: none is known to)."""
        implemented = implemented_headers(paths)
        named_reexports = (p for p in paths if PurePosixPath(p).name in _REEXPORT_NAMES)
        return cls(
            frozenset(implemented),
            frozenset(documented_headers(implemented, documented) if documented else ()),
            tuple(sorted(kept_first_versions(paths))),
            satellite_packages(paths),
            tuple(sorted(source_folders(paths))),
            frozenset(p for p in named_reexports if defines(p)) if defines else frozenset(),
        )


def _pair_of(path: str, present: Callable[[str], bool]) -> tuple[str, str] | None:
    """(header, source) when `path` is a C/C++ header with a source file of its name in its
    folder, or such a source with a header that has it for its source (the first of
    `_SOURCE_SUFFIXES` that is `present`)."""
    root, suffix = posixpath.splitext(path)
    suffix = suffix.lower()
    if suffix in _HEADER_SUFFIXES:
        source = next((root + s for s in _SOURCE_SUFFIXES if present(root + s)), None)
        return (path, source) if source is not None else None
    if suffix in _SOURCE_SUFFIXES:
        header = next((root + h for h in _HEADER_SUFFIXES if present(root + h)), None)
        pair = _pair_of(header, present) if header is not None else None
        return pair if pair is not None and pair[1] == path else None
    return None


def implemented_headers(paths: Sequence[str]) -> dict[str, str]:
    """The headers among `paths` with a source file of the same name in the same folder, each
    with that source."""
    present = set(paths)
    pairs = (_pair_of(path, present.__contains__) for path in paths if path.lower().endswith(_HEADER_SUFFIXES))
    return {header: source for header, source in filter(None, pairs)}


def documented_headers(implemented: Mapping[str, str], documented: Callable[[str], int]) -> set[str]:
    """The headers of `implemented` (header -> its source) that document more of their
    declarations than their source does (`documented`: a file's count,
    `search_engine.ranking.doc_comments.documented_declarations`): there the header is the
    explanation a question asks for, and it keeps full weight."""
    return {header for header, source in implemented.items() if documented(header) > documented(source)}


def source_folders(paths: Sequence[str]) -> set[str]:
    """The docs-named folders (`doc/`, `docs/`, `www/`, with their slash; the outermost in a
    path) among `paths` that hold more source files than pages (prose, HTML, CSS): code, not
    documentation."""
    counts: dict[str, list[int]] = {}
    for path in paths:
        m = _DOCS_DIR_RE.search(path)
        if m is None:
            continue
        language = language_for(path)
        kind = file_kind(path, language)
        tally = counts.setdefault(path[: m.end()].rstrip("/") + "/", [0, 0])
        if kind is FileKind.DOCS or language in _PAGE_LANGUAGES:
            tally[1] += 1
        elif kind is FileKind.CODE:
            tally[0] += 1
    return {folder for folder, (source, pages) in counts.items() if source > pages}


def kept_first_versions(paths: Sequence[str]) -> set[str]:
    """The `.../v1/` folders (with their slash) among `paths` that keep a first version of the
    files one level up (see the module doc)."""
    present = set(paths)
    twins: dict[str, int] = {}
    for path in paths:
        m = _V1_RE.match(path)
        if m and m["parent"] + m["rest"] in present:
            folder = m["parent"] + "v1/"
            twins[folder] = twins.get(folder, 0) + 1
    return {folder for folder, n in twins.items() if n >= _MIN_V1_TWINS}


def satellite_packages(paths: Sequence[str]) -> dict[str, frozenset[str]]:
    """The top-level folders among `paths` that are packages beside a root package (see the
    module doc), each with the words of its name; none when the root is no package."""
    top = [p for p in paths if "/" not in p]
    if not any(map(_MANIFEST_RE.match, top)) or not any(p.split("/", 1)[0] in _SOURCE_DIRS for p in paths):
        return {}
    manifests, sources = set(), set()
    for path in paths:
        parts = path.split("/", 2)
        if len(parts) == 2 and _MANIFEST_RE.match(parts[1]):
            manifests.add(parts[0])
        elif len(parts) == 3 and parts[1] in _SOURCE_DIRS:
            sources.add(parts[0])
    return {folder: frozenset(_WORD_RE.findall(folder.lower())) for folder in sorted(manifests & sources)}


@lru_cache(maxsize=65536)
def _path_kinds(path: str, language: str | None) -> frozenset[str]:
    kinds = set()
    if _TEST_PATH_RE.search(path):
        kinds.add("test")
    if _EXAMPLE_DIR_RE.search(path):
        kinds.add("example")
    if _TOOLING_DIR_RE.search(path):
        kinds.add("tooling")
    if _BUILD_FILE_RE.search(path):
        kinds.add("build_file")
    if _PLATFORM_RE.search(path):
        kinds.add("platform")
    if PurePosixPath(path).name in _REEXPORT_NAMES:
        kinds.add("reexport")
    kind = file_kind(path, language)
    if _SHIM_DIR_RE.search(path) or kind is FileKind.VENDORED:
        kinds.add("shim")
    if kind is FileKind.CODE and _DOCS_DIR_RE.search(path):
        kinds.add("docs_code")
    kinds.add(_KIND_NAMES.get(kind, "code"))
    return frozenset(kinds)


_KIND_NAMES = {
    FileKind.DOCS: "prose",
    FileKind.CONFIG: "config",
    FileKind.DATA: "data",
    FileKind.GENERATED: "generated",
    FileKind.TEMPLATE: "template",
}
