"""What agents read about the tools: descriptions (each under 2 KB), annotations and `_meta`.

Kept apart from the tool bodies because the words are an interface of their own: they teach an
agent the paging contract, and tests hold them to their size limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import ToolAnnotations

from server.output import CHARS_PER_TOKEN

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
"""Every tool that only reads: read-only and closed-world. destructiveHint and idempotentHint
are left out: the spec gives them meaning only for tools that are not read-only."""


LOCAL_WRITES = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
"""A tool that changes local state (an index) but destroys nothing: idempotent, closed-world.
readOnlyHint is left out: false is its default."""


OutputModeName = Literal["auto", "inline", "file_ref", "legacy"]
"""The `output_mode` argument every tool with one accepts (`server.output.OutputMode`'s values)."""


@dataclass(frozen=True, slots=True)
class Paging:
    """The paging contract: the sentence every search tool's description ends with, and the
    description of its `cursor` parameter."""

    tool: str
    cursor: str


def paging(cursor_max_age_s: float) -> Paging:
    """The paging contract, with the cursor's lifetime."""
    hours = cursor_max_age_s / 3600
    age = f"{hours:g} h" if hours >= 1 else f"{cursor_max_age_s / 60:g} min"
    return Paging(
        tool="Paged: pass only cursor=pagination.next_cursor until null.",
        cursor=f"pagination.next_cursor, valid {age}",
    )


REGEX_DESCRIPTION = (
    "Grep with ripgrep for exact names and patterns (skips gitignored, binary and vendored "
    "files). Matches: results.files {path: {line: text}}. "
)

HYBRID_DESCRIPTION = (
    "Best default to find code by name or meaning ('ClientSession', 'where are connections "
    "pooled'); mode=semantic: by meaning alone. The first call may wait for indexing. "
)


ANALYZE_DESCRIPTION = (
    "Read-only DuckDB SQL over saved results: views dataset_<id> (the id of a file_ref or of list-saved-datasets)."
)

READ_PAGE_DESCRIPTION = (
    "Read a saved dataset page by page (results.records); pass pagination.next_cursor back "
    "as `cursor`, with the same dataset_id, until it is null."
)


def search_meta(max_tokens: int) -> dict[str, Any]:
    """`anthropic/maxResultSizeChars` tells Claude Code the largest answer to expect: our page
    ceiling, in characters (the token estimate counts `CHARS_PER_TOKEN` ASCII characters a token)."""
    return {"anthropic/maxResultSizeChars": max_tokens * CHARS_PER_TOKEN}
