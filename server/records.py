"""The wire shape of one match: how a `Match` looks to an agent, inline, in an offloaded file,
in a saved dataset or printed by `codepager search --json/--jsonl`.

There is one printer per detail level (`match_record`), so every sink of the same detail level
shows the same object:

- `compact` (the default): `{"path", "line", "end"?, "text"?, "score"?, "before"?, "after"?,
  "changed"?}`; `changed` (both shapes) marks a match whose file changed since its search
  (`search_engine.live.recheck`).
  Only what an agent can use and cannot derive: no byte offsets, language or match type (the
  tool name says it), no duplicate line number, scores rounded to 4 significant digits, no
  hybrid component ranks. `end` appears only when the match spans lines. On an inline page the
  records are grouped by file (`group_by_file`), so each path is written once.
- `full`: the seed-compatible shape (`file`, `match.span`, `type`, `context`, `ranks`), which
  `output_mode=legacy` prints.

`jq_filter` runs over the records of the page's detail level (`server.jq.view`). Snippet
cutting is presentation: it happens here, never in the engine, so changing `snippet_length`
does not change the search (or its cursor).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from search_engine import Match, MatchType

CUT_MARK = "…"


class Detail(str, Enum):
    """How much of each match an answer carries: presentation, never part of a search (a
    `jq_filter` view, which runs over the records of one detail level, keeps its own)."""

    COMPACT = "compact"
    FULL = "full"


def round_score(score: float) -> float:
    """4 significant digits: enough to order hybrid scores (RRF units, ~0.03) and cosines alike."""
    return float(f"{score:.4g}")


def cut_snippet(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters, marking the cut.

    Python strings index code points, so a cut never lands inside a UTF-8 sequence. A high
    surrogate left at the edge would be half of a UTF-16 pair (text decoded with
    "surrogatepass"), which no JSON encoder can carry alone, so it is dropped too.
    """
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - len(CUT_MARK))]
    if head and "\ud800" <= head[-1] <= "\udbff":
        head = head[:-1]
    return head + CUT_MARK


def match_record(m: Match, *, detail: Detail = Detail.FULL, snippet_length: int | None = None) -> dict[str, Any]:
    """The JSON object for one match at `detail` (see the module docstring for both shapes), its
    text cut to `snippet_length` characters (None: whole; 0: left out, locations only)."""
    if detail is Detail.COMPACT:
        return compact_record(m, snippet_length=snippet_length)
    return full_record(m, snippet_length=snippet_length)


def _text(m: Match, snippet_length: int | None) -> str:
    return m.content if snippet_length is None else cut_snippet(m.content, snippet_length)


def compact_record(m: Match, *, snippet_length: int | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"path": m.path, "line": m.line_start}
    if m.line_end != m.line_start:
        record["end"] = m.line_end
    if snippet_length != 0:
        record["text"] = _text(m, snippet_length)
    if m.score is not None:
        record["score"] = round_score(m.score)
    if m.context_before:
        record["before"] = list(m.context_before)
    if m.context_after:
        record["after"] = list(m.context_after)
    if m.changed is not None:
        record["changed"] = m.changed
    return record


def full_record(m: Match, *, snippet_length: int | None = None) -> dict[str, Any]:
    """The seed-compatible object (`detail="full"`, `output_mode=legacy`)."""
    body: dict[str, Any] = {
        "span": {
            "byte_start": m.byte_start,
            "byte_end": m.byte_end,
            "line_start": m.line_start,
            "line_end": m.line_end,
        },
    }
    if snippet_length != 0:
        body["content"] = _text(m, snippet_length)
    if m.type is MatchType.REGEX:
        body["line_number"] = m.line_start
    if m.score is not None:
        body["score"] = round(m.score, 6)
    if m.ranks:
        body["ranks"] = dict(m.ranks)
    record: dict[str, Any] = {
        "file": {"path": m.path, "language": m.language},
        "match": body,
        "type": m.type.value,
    }
    if m.context_before or m.context_after:
        record["context"] = {"before": list(m.context_before), "after": list(m.context_after)}
    if m.changed is not None:
        record["changed"] = m.changed
    return record


def line_key(record: dict[str, Any]) -> str:
    """A compact record's key inside its file group: "12", or "12-30" for a match over lines."""
    end = record.get("end")
    return f"{record['line']}-{end}" if end is not None else str(record["line"])


def group_by_file(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Compact records as an inline page shows them: `{path: {line_key: entry}}`.

    The entry is the match's text alone when that is all it has (the common regex case, which
    makes a match cost about what `rg -n` prints for it), `null` without a snippet, else the
    record without `path`, `line` and `end` (which the keys already say). Files keep the order
    of their first match; a ranked list that returns to a file adds to that file's group, so
    a page never names a path twice (every record keeps its score, so the ranking stays
    readable). `records_of_groups` is the inverse. The engine never returns one location twice
    (one record per line, one per chunk); a jq_filter that repeats a record is shown once.
    """
    files: dict[str, dict[str, Any]] = {}
    for record in records:
        rest = {k: v for k, v in record.items() if k not in ("path", "line", "end")}
        entry: Any = rest if set(rest) - {"text"} else rest.get("text")
        files.setdefault(record["path"], {})[line_key(record)] = entry
    return files


def records_of_groups(files: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The compact records behind `group_by_file(...)`, file by file (the inverse, up to the
    order of a ranked list that returned to a file)."""
    out: list[dict[str, Any]] = []
    for path, entries in files.items():
        for key, entry in entries.items():
            first, _, last = key.partition("-")
            record: dict[str, Any] = {"path": path, "line": int(first)}
            if last:
                record["end"] = int(last)
            if isinstance(entry, dict):
                record.update(entry)
            elif entry is not None:
                record["text"] = entry
            out.append(record)
    return out


def full_record_to_compact(record: dict[str, Any]) -> dict[str, Any]:
    """The compact record of the same match as a full record (for the text block of a
    `detail="full"` page, which prints compact records whatever the page's detail)."""
    body, span, context = record["match"], record["match"]["span"], record.get("context") or {}
    out: dict[str, Any] = {"path": record["file"]["path"], "line": span["line_start"]}
    if span["line_end"] != span["line_start"]:
        out["end"] = span["line_end"]
    if "content" in body:
        out["text"] = body["content"]
    if body.get("score") is not None:
        out["score"] = round_score(body["score"])
    for key in ("before", "after"):
        if context.get(key):
            out[key] = list(context[key])
    return out
