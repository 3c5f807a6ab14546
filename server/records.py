"""The wire shape of one match: how a `Match` looks to an agent, inline or in an offloaded file.

One function makes the record and one reads it back, so inline pages, JSONL files, `legacy`
output and `jq_filter` all agree on the shape. Snippet cutting is presentation: it happens here,
never in the engine, so changing `snippet_length` does not change the search (or its cursor).
"""

from __future__ import annotations

from typing import Any

from search_engine.models import Match, MatchType

CUT_MARK = "…"


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


def match_record(m: Match, *, include_snippet: bool = True, snippet_length: int | None = None) -> dict[str, Any]:
    """The inline JSON object for one match (issue 5's response shape)."""
    body: dict[str, Any] = {
        "span": {
            "byte_start": m.byte_start,
            "byte_end": m.byte_end,
            "line_start": m.line_start,
            "line_end": m.line_end,
        },
    }
    if include_snippet:
        body["content"] = cut_snippet(m.content, snippet_length) if snippet_length else m.content
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
    return record


def match_from_record(record: Any) -> Match:
    """Read a record made by `match_record(include_snippet=True)` back into a `Match`.

    Used by `jq_filter`: the filter works on records, and what it keeps becomes a result list
    of its own. Raises ValueError naming what is missing, so a filter that reshapes records
    (e.g. `map(.file.path)`) gets an error that says how to write it instead.
    """
    if not isinstance(record, dict):
        raise ValueError(f"expected a match object, got {type(record).__name__}")
    try:
        span = record["match"]["span"]
        context = record.get("context") or {}
        return Match(
            path=record["file"]["path"],
            language=record["file"].get("language"),
            line_start=int(span["line_start"]),
            line_end=int(span["line_end"]),
            byte_start=int(span["byte_start"]),
            byte_end=int(span["byte_end"]),
            content=record["match"].get("content", ""),
            type=MatchType(record["type"]),
            score=record["match"].get("score"),
            context_before=tuple(context.get("before") or ()),
            context_after=tuple(context.get("after") or ()),
            ranks=record["match"].get("ranks"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a match object (missing or invalid {exc})") from None
