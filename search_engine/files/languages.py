"""Which language a file is written in, and what kind of file it is, judged by its name alone.

Regex matches carry the language so an agent can tell code from docs at a glance, and the
semantic chunker picks its tree-sitter grammar by it, so both must agree: one table, here.
Ranking also needs the *kind* of file (`file_kind`): code, docs, config, data, generated,
vendored or template, so a README, a lock file or a trybuild `.stderr` expectation does not compete with the
source it mentions. Reading file contents (shebangs, modelines) is deliberately out of scope:
this runs once per matched file in the hot path of a regex search.
"""

from __future__ import annotations

import functools
import posixpath
import re
from enum import Enum

_BY_EXTENSION: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".m": "objc",
    ".mm": "objcpp",
    ".lua": "lua",
    ".pl": "perl",
    ".pm": "perl",
    ".r": "r",
    ".jl": "julia",
    ".dart": "dart",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".hs": "haskell",
    ".mli": "ocaml",
    ".clj": "clojure",
    ".zig": "zig",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".fish": "fish",
    ".ps1": "powershell",
    ".sql": "sql",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",  # markdown with JSX components: prose all the same
    ".mdc": "markdown",
    ".rst": "rst",
    ".adoc": "asciidoc",
    ".asciidoc": "asciidoc",
    ".rdoc": "rdoc",
    ".txt": "text",
    ".heex": "eex",
    ".eex": "eex",
    ".leex": "eex",
    ".erb": "erb",
    ".haml": "haml",
    ".slim": "slim",
    ".liquid": "liquid",
    ".hbs": "handlebars",
    ".mustache": "handlebars",
    ".sass": "scss",
    ".less": "less",
    ".gradle": "groovy",
    ".groovy": "groovy",
    ".properties": "properties",
    ".env": "dotenv",
    ".csv": "csv",
    ".tsv": "csv",
    ".svg": "svg",
    ".lock": "lockfile",
    ".map": "sourcemap",
    ".snap": "snapshot",
    ".stderr": "expected-output",
    ".stdout": "expected-output",
    ".gemspec": "ruby",
    ".ru": "ruby",
    ".rake": "ruby",
    ".cu": "cpp",
    ".ksh": "shell",
    ".bat": "batch",
    ".cmd": "batch",
    ".ml": "ocaml",
    ".json": "json",
    ".jsonl": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".scss": "scss",
    ".vue": "vue",
    ".svelte": "svelte",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".tf": "hcl",
    ".cmake": "cmake",
}

_BY_NAME: dict[str, str] = {
    "makefile": "make",
    "gnumakefile": "make",
    "dockerfile": "dockerfile",
    "cmakelists.txt": "cmake",
    "gemfile": "ruby",
    "rakefile": "ruby",
    "vagrantfile": "ruby",
    "package-lock.json": "lockfile",
    "yarn.lock": "lockfile",
    "pnpm-lock.yaml": "lockfile",
    "cargo.lock": "lockfile",
    "gemfile.lock": "lockfile",
    "poetry.lock": "lockfile",
    "mix.lock": "lockfile",
    "go.sum": "lockfile",
    ".bashrc": "shell",
    ".zshrc": "shell",
    ".profile": "shell",
}


@functools.lru_cache(maxsize=4096)
def language_for(path: str) -> str | None:
    """Language name for `path` (any separator style), or None when unknown.

    Exact file names win over extensions (`CMakeLists.txt` is cmake, not text). Matching is
    case-insensitive because `Makefile`/`makefile` and `.PY` on case-insensitive file systems
    mean the same thing.
    """
    name = posixpath.basename(path.replace("\\", "/")).lower()
    by_name = _BY_NAME.get(name)
    if by_name is not None:
        return by_name
    if name.startswith("dockerfile."):
        return "dockerfile"
    return _BY_EXTENSION.get(posixpath.splitext(name)[1])


class FileKind(str, Enum):
    """What a file is for, which says how likely it is to be the answer to a code search."""

    CODE = "code"
    DOCS = "docs"
    CONFIG = "config"
    DATA = "data"
    GENERATED = "generated"
    VENDORED = "vendored"
    TEMPLATE = "template"  # views and code generators' templates: written by hand, not the logic


# Languages that are not code. Anything else with a language (templates and markup included:
# someone wrote them) is code; a file with no known language is data.
_KIND_BY_LANGUAGE: dict[str, FileKind] = {
    **dict.fromkeys(("markdown", "rst", "text", "asciidoc", "rdoc"), FileKind.DOCS),
    **dict.fromkeys(
        ("json", "yaml", "toml", "ini", "properties", "dotenv", "xml", "cmake", "make", "dockerfile", "hcl"),
        FileKind.CONFIG,
    ),
    **dict.fromkeys(("csv", "svg"), FileKind.DATA),
    **dict.fromkeys(("eex", "erb", "haml", "slim", "liquid", "handlebars"), FileKind.TEMPLATE),
    **dict.fromkeys(("lockfile", "sourcemap", "snapshot", "expected-output"), FileKind.GENERATED),
}
# Extension-less files that are prose (`LICENSE`, `AUTHORS`, `ChangeLog`...).
_DOC_NAMES = re.compile(
    r"^(?:licen[cs]e|copying|authors|contributors|changelog|changes|news|readme|notice|history)"
    r"(?:[-_.].*)?$"
)
_GENERATED_NAME = re.compile(r"\.min\.(?:js|css)$|\.(?:pb|generated|gen|g)\.\w+$|_pb2\.py$")
_VENDORED_DIR = re.compile(r"(?:^|/)(?:vendor|vendored|_vendor|third_party|thirdparty|node_modules)/")


@functools.lru_cache(maxsize=65536)
def file_kind(path: str, language: str | None = None) -> FileKind:
    """The kind of a file, from its path and language (`language_for(path)` when not given).

    Directory rules win (a vendored copy of code is vendored, not code), then generated-file
    names, then the language table; a file of unknown language is data."""
    norm = path.replace("\\", "/")
    if _VENDORED_DIR.search(norm):
        return FileKind.VENDORED
    name = posixpath.basename(norm).lower()
    if _GENERATED_NAME.search(name):
        return FileKind.GENERATED
    language = language if language is not None else language_for(norm)
    if language is None:
        return FileKind.DOCS if _DOC_NAMES.match(name) else FileKind.DATA
    return _KIND_BY_LANGUAGE.get(language, FileKind.CODE)
