"""The text block of a search answer, and `codepager search`'s text output: grep's layout.

structuredContent carries the data; the text block is for clients that show text (Cursor, and
any client we do not know), so it is what `rg -n` would print rather than a second copy of the
JSON: a header line (tool, query, counts, page, next cursor), warnings, then ripgrep's
`--heading` layout: each file's path on a line of its own, then `line:text` for each match
line and `line-text` for context lines, `--` between context groups. A client known to show
only structuredContent (`server.clients`) gets the header alone. The CLI prints the same lines
with the path on each (`path:line:text`), as grep does into a pipe.

Both sinks print compact match records (`server.records`), so the CLI's lines and the text
block are the same lines for the same matches.

A file's name is the repository's to choose, and git stores `zz\\nreal.py\\n2:    return True`
as readily as `app.py`: printed raw, it showed a heading `real.py` and a forged `2:` line, and
a name holding terminal escape sequences drove the terminal. So a name holding a control
character is quoted as git quotes it (`"zz\\nreal.py\\n2:..."`, `\\033` for ESC) wherever these
lines print it, and a warning's control characters are escaped; structuredContent and JSON keep
the real name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from server.records import full_record_to_compact, records_of_groups

#: What may not show raw in a line of text: C0 and C1 controls (ESC starts a terminal escape
#: sequence, 0x9b is CSI on its own), DEL, and the Unicode line and paragraph separators.
_CONTROL = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_UNSAFE = re.compile(f"[{_CONTROL}]")
_QUOTED = re.compile(f'[{_CONTROL}"\\\\]')
_C_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}


def _c_escape(match: re.Match[str]) -> str:
    """One character as C (and git) escape it: a letter, else octal of its UTF-8 bytes."""
    char = match.group()
    letter = _C_ESCAPES.get(char)
    return f"\\{letter}" if letter else "".join(f"\\{b:03o}" for b in char.encode("utf-8", "surrogatepass"))


def shown_name(path: str) -> str:
    """`path` as one line of text can show it: as it is, or, holding a control character
    (or starting with a quote, which would read as quoted), in double quotes with git's C
    escapes (`"a\\nb.py"`), so no name reads as another line or another name."""
    if not _UNSAFE.search(path) and not path.startswith('"'):
        return path
    return '"' + _QUOTED.sub(_c_escape, path) + '"'


def one_line(text: str) -> str:
    """`text` (a warning that may name a file) with its control characters escaped."""
    return _UNSAFE.sub(_c_escape, text)


def grep_lines(
    records: Iterable[dict[str, Any]], context: bool, *, heading: bool = False, with_name: bool = True
) -> Iterator[str]:
    """grep's text layout over compact records. Neighbouring matches share context lines (one's
    "after" is the next one's "before"), so each line is printed once, and `--` separates
    groups that are not contiguous, as grep does when context is asked for.

    `heading` is ripgrep's `--heading` layout: the path on a line of its own before each
    file's lines, which then start at the line number (what the text block uses: the path
    once per file, as on a compact page). Without `with_name` (one file named on the command
    line) lines start at the line number, as in rg and grep."""
    last_path: str | None = None
    last_line = 0
    for r in records:
        path = shown_name(r["path"])
        new_file = path != last_path
        if new_file:
            last_line = 0
        before = r.get("before") or []
        first = r["line"] - len(before)
        if context and last_path is not None and (new_file or first > last_line + 1):
            yield "--\n"
        if heading and new_file:
            yield f"{path}\n"
        prefix = "" if heading or not with_name else path
        for number, text in enumerate(before, first):
            if number > last_line:
                yield f"{prefix}-{number}-{text}\n" if prefix else f"{number}-{text}\n"
        for number, text in enumerate(str(r.get("text", "")).split("\n"), r["line"]):
            yield f"{prefix}:{number}:{text}\n" if prefix else f"{number}:{text}\n"
        last_line = r.get("end", r["line"])
        for number, text in enumerate(r.get("after") or [], last_line + 1):
            yield f"{prefix}-{number}-{text}\n" if prefix else f"{number}-{text}\n"
            last_line = number
        last_path = path


def page_records(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The compact records of an inline page of either detail level."""
    if isinstance(results.get("files"), dict):
        return records_of_groups(results["files"])
    return [full_record_to_compact(r) for r in results.get("matches") or [] if isinstance(r, dict)]


def header(tool: str, response: dict[str, Any], *, with_cursor: bool = True) -> str:
    """One line saying what this is and how to go on, then one line per warning. Without
    `with_cursor` (a client that reads structuredContent, where the cursor is) the line says
    whether there is a next page but not the cursor's 300 characters again."""
    results = response.get("results", {})
    pagination = response.get("pagination", {})
    query = response.get("search", {}).get("query", "")
    parts = [f"{tool} '{query}': {results.get('count', 0)} of {results.get('total_count', 0)} matches"]
    if pagination.get("total_pages", 1) > 1:
        parts.append(f"page {pagination.get('current_page')}/{pagination.get('total_pages')}")
    cursor = pagination.get("next_cursor")
    if not cursor:
        parts.append("last page")
    else:
        parts.append(f"next_cursor={cursor}" if with_cursor else "more: pagination.next_cursor")
    lines = [", ".join(parts)]
    lines += [f"warning: {one_line(w)}" for w in response.get("metadata", {}).get("warnings") or []]
    return "\n".join(lines) + "\n"


def page_text(tool: str, response: dict[str, Any], *, with_matches: bool) -> str:
    """The text block of `response` (a search tool's structured answer, any results mode)."""
    results = response.get("results", {})
    out = header(tool, response, with_cursor=with_matches)
    mode = results.get("mode")
    if mode == "file_ref":
        ref = results["file_ref"]
        out += f"page written to {ref['path']} (JSON Lines, line 1 a header); see results.file_ref\n"
        dataset = ref.get("dataset") or {}
        if dataset.get("id") not in (None, ref.get("id")):
            out += (
                f"whole result list ({dataset['rows']} of {dataset['total_count']} matches) for SQL and jq: "
                f"dataset {dataset['id']}, {dataset['path']}\n"
            )
    elif mode == "stats_only":
        stats = results.get("stats") or {}
        out += "".join(f"{shown_name(f['path'])}: {f['count']}\n" for f in stats.get("top_files") or [])
    elif not with_matches:
        out += "matches: see structuredContent\n"
    else:
        context = bool(response.get("search", {}).get("parameters", {}).get("context_lines"))
        out += "".join(grep_lines(page_records(results), context, heading=True))
    return out
