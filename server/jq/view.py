"""`jq_filter` as a session view: the filter runs over the search's whole list of match records
and what it keeps becomes a result list of its own, with its own session and cursors (the
Pager re-applies it when it restores a session from a cursor).

The filter sees the records the agent is shown (`server.records`): compact ones (`{path, line,
text, ...}`) by default, the full objects with `detail="full"` (or `output_mode=legacy`), so a
filter is written against the shape every page shows; the text is whole, never cut to
`snippet_length`. The shape is part of the view (`view_key`): a filter means something else
over the other shape, so the two are different lists, sessions and cursors.

A filter may keep, sort or slice the records, nothing else. What it keeps is mapped back to
the matches it came from by the match's location (path and lines, and the byte span in full
records), and must equal that match's record: a record it changed or made up is refused,
naming the first field that differs as the filter sees it (`.path`, `.match.span.line_start`).
The pages then show the engine's own matches, never values a filter wrote. Every refusal
shows one record of the list, so the shape is on the screen of whoever fixes the filter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from infra import Slots
from search_engine import SearchResult
from server.errors import JqFilterError, JqTimeoutError
from server.jq import sandbox
from server.jq.sandbox import KEEP_ONLY, apply_jq, check_expression
from server.output import clip_strings, dumps
from server.records import Detail, match_record
from server.settings import JqSettings

#: How a view over full records starts; no filter can (`check_expression` refuses NUL).
_FULL = "\x00full\x00"
#: Characters of each string of the example record an error shows.
_EXAMPLE_CHARS = 80


def view_key(expression: str | None, detail: Detail) -> str | None:
    """The session view of `jq_filter=expression` over records of `detail`: the expression
    itself for compact records, marked for full ones. Refuses what the sandbox would refuse
    (before any search runs)."""
    if expression is None:
        return None
    check_expression(expression)
    return _FULL + expression if detail is Detail.FULL else expression


def view_expression(view: str) -> str:
    """The jq_filter a view runs, as the agent wrote it."""
    return view.removeprefix(_FULL)


def _view_detail(view: str) -> Detail:
    return Detail.FULL if view.startswith(_FULL) else Detail.COMPACT


def jq_view(settings: JqSettings) -> Callable[[SearchResult, str], SearchResult]:
    """The view; its filters share `sandbox.MAX_WORKERS` workers (the server makes one)."""
    workers = Slots(sandbox.MAX_WORKERS)

    def view(result: SearchResult, view: str) -> SearchResult:
        detail = _view_detail(view)
        records = [match_record(m, detail=detail) for m in result.matches]
        try:
            kept = apply_jq(
                records,
                view_expression(view),
                limits=settings,
                keep_only=True,
                workers=workers,
            )
            chosen = _kept_matches(records, kept, detail)
        except JqTimeoutError:
            raise
        except JqFilterError as exc:
            raise JqFilterError(f"{exc}. {_shape(records, detail)}") from None
        matches = [result.matches[i] for i in chosen]
        warning = f"jq_filter kept {len(matches)} of {len(result.matches)} matches"
        return replace(result, matches=matches, warnings=[*result.warnings, warning])

    return view


def _shape(records: Sequence[dict[str, Any]], detail: Detail) -> str:
    """What the filter runs over, with one record of it."""
    other = (
        'detail="compact" (the default) gives the compact ones'
        if detail is Detail.FULL
        else 'detail="full" gives the full objects (.file.path, .match.span, ...)'
    )
    shape = f"jq_filter runs over the array of {detail.value} match records the pages show ({other})"
    if not records:
        return f"{shape}; this search found none"
    return f"{shape}; the first is {dumps(clip_strings(records[0], _EXAMPLE_CHARS))}"


def _location(record: Any, detail: Detail) -> tuple[Any, ...] | None:
    """Where a record's match is: what tells two matches of one search apart."""
    key: tuple[Any, ...]
    try:
        if detail is Detail.FULL:
            span = record["match"]["span"]
            key = (record["file"]["path"], span["line_start"], span["line_end"], span["byte_start"], span["byte_end"])
        else:
            key = (record["path"], record["line"], record.get("end"))
        hash(key)
    except (KeyError, TypeError, AttributeError):
        return None
    return key


def _kept_matches(records: Sequence[dict[str, Any]], kept: Sequence[Any], detail: Detail) -> list[int]:
    """The index in `records` of each record the filter kept, in its order; JqFilterError for
    one that is not a record of the list as it was."""
    if len(kept) > len(records):
        raise JqFilterError(f"jq_filter turned {len(records)} matches into {len(kept)}: {KEEP_ONLY}")
    where: dict[tuple[Any, ...], list[int]] = {}
    for i, record in enumerate(records):
        key = _location(record, detail)
        if key is not None:
            where.setdefault(key, []).append(i)
    chosen = []
    for value in kept:
        key = _location(value, detail)
        candidates = where.get(key, []) if key is not None else []
        index = next((i for i in candidates if _same(value, records[i])), None)
        if index is None:
            originals = [records[i] for i in candidates] or records
            raise JqFilterError(
                f"jq_filter must keep the match records as they are ({KEEP_ONLY}), but it produced "
                f"{_what_changed(value, originals)}"
            )
        chosen.append(index)
    return chosen


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are one number (jq writes a whole float as an integer), but
    neither is `true`, and key order does not count."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return False


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def _what_changed(value: Any, originals: Sequence[dict[str, Any]]) -> str:
    """What makes `value` no record of the list, said with the first field that differs from
    the record it most likely came from: of `originals`, the one it agrees with most."""
    if isinstance(value, list):  # not shown: it may nest as deep as jq let it
        return "an array, not a match record"
    if not isinstance(value, dict):
        return f"{_json_type(value)} ({dumps(clip_strings(value, _EXAMPLE_CHARS))}), not a match record"
    if not originals:
        return "a record, but the search found no matches"
    model = max(originals, key=lambda record: _agreement(value, record))
    where, mine, theirs = _first_difference(value, model, "")
    if mine is _MISSING:
        return f"a record without `{where}`"
    if theirs is _MISSING:
        return f"a record with `{where}`, which the match records do not have"
    if _json_type(mine) != _json_type(theirs):
        return f"a record whose `{where}` is {_json_type(mine)}; in the match records it is {_json_type(theirs)}"
    return f"a record whose `{where}` is {dumps(clip_strings(mine, _EXAMPLE_CHARS))}, a value no match has there"


_MISSING = object()


def _agreement(mine: Any, theirs: Any) -> int:
    """How many of the leaves of `theirs` (a record) `mine` has, equal, at the same place."""
    if isinstance(theirs, dict):
        return sum(_agreement(mine[k], v) for k, v in theirs.items() if k in mine) if isinstance(mine, dict) else 0
    return int(_same(mine, theirs))


def _first_difference(mine: Any, theirs: Any, where: str) -> tuple[str, Any, Any]:
    """The jq path of the first place `mine` differs from `theirs`, and the two values there
    (`_MISSING` for a key one of them lacks); `where` itself when they differ as a whole."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key, value in theirs.items():
            if key not in mine:
                return f"{where}.{key}", _MISSING, value
            if not _same(mine[key], value):
                return _first_difference(mine[key], value, f"{where}.{key}")
        extra = next((k for k in mine if k not in theirs), None)
        if extra is not None:
            return f"{where}.{extra}", mine[extra], _MISSING
    return where or ".", mine, theirs
