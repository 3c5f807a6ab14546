"""What agents read about the tools: descriptions (each under 2 KB), annotations and `_meta`.

Kept apart from the tool bodies because the words are an interface of their own: they teach an
agent the paging contract, and tests hold them to their size limit.
"""

from __future__ import annotations

from typing import Any

from mcp_types import ToolAnnotations

_PAGING = (
    "Results come in pages. If pagination.next_cursor is not null, call the same tool again with "
    "only cursor=<next_cursor> (other arguments may be omitted) to get the next page; stop when "
    "next_cursor is null. Never edit a cursor. If results.mode is 'file_ref', the page was too big "
    "to show inline and was written to a JSONL file: read results.file_ref.guidance and use the jq "
    "recipes or the resource URI; next_cursor still works. Use stats_only=true first to see how "
    "many matches there are and where, and jq_filter to narrow them before paging."
)

REGEX_DESCRIPTION = (
    "Search file contents with a regular expression (ripgrep syntax), or a literal with "
    "fixed_string=true. Respects .gitignore; skips binary, huge and vendored files. Returns every "
    "matching line with its path, line number, byte span and optional context lines, ordered by "
    "path then line. " + _PAGING
)

SEMANTIC_DESCRIPTION = (
    "Find code by meaning: 'where are retries handled', 'how is the session cookie parsed'. "
    "Ranks functions, classes and other chunks by embedding similarity. Use when you don't know "
    "the identifiers; prefer hybrid_search when the query mixes names and intent. The first call "
    "on a repository may wait for indexing. " + _PAGING
)

HYBRID_DESCRIPTION = (
    "Best default for finding code: fuses keyword (BM25), exact/fuzzy symbol and semantic "
    "signals, so both 'ClientSession' and 'where are connections pooled' rank the right code "
    "first. Each match reports the component ranks that put it there. The first call on a "
    "repository may wait for indexing. " + _PAGING
)


def search_annotations() -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def search_meta(max_tokens: int) -> dict[str, Any]:
    """`anthropic/maxResultSizeChars` tells Claude Code the largest answer to expect: our page
    ceiling, in characters (the token estimate counts 4 ASCII characters per token)."""
    return {"anthropic/maxResultSizeChars": max_tokens * 4}
