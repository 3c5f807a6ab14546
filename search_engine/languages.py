"""Which language a file is written in, judged by its name alone.

Regex matches carry it so an agent can tell code from docs at a glance, and the semantic
chunker picks its tree-sitter grammar by it, so both must agree: one table, here. Reading file
contents (shebangs, modelines) is deliberately out of scope: this runs once per matched file in
the hot path of a regex search.
"""

from __future__ import annotations

import functools
import posixpath

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
    ".ml": "ocaml",
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
    ".rst": "rst",
    ".txt": "text",
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
