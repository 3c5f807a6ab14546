"""Making one record smaller, visibly: the last resort when even a single record is too big.

Cutting a page to fewer records is lossless (the cursor resumes at the first omitted one), but
when the *first* record alone is over the limit, cutting to zero records would hand back a
cursor pointing at the same record forever. Instead its largest strings (or lists) are cut,
each cut marked in place with how much was left out, and the caller warns that the full
record is available with output_mode=file_ref.
"""

from __future__ import annotations

import copy
from typing import Any

from server.output.jsontext import byte_size, dumps
from server.output.tokens import estimate_tokens

#: Slack for the token estimate not being exactly additive (ceil per part).
_TOKEN_SLACK = 2
_BYTE_SLACK = 8


def _marker(omitted: int, unit: str) -> str:
    return f"…[cut {omitted} {unit} to fit the output limit]"


def clip_strings(value: Any, max_chars: int) -> Any:
    """A copy of `value` with every string longer than `max_chars` cut and marked."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        return value[:max_chars] + _marker(len(value) - max_chars, "chars")
    if isinstance(value, dict):
        return {k: clip_strings(v, max_chars) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_strings(v, max_chars) for v in value]
    return value


def _size(value: Any) -> tuple[int, int]:
    text = dumps(value)
    return estimate_tokens(text), byte_size(text)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every string and list inside `value`, with the key path leading to it."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, list):
        out.append((path, value))
        for i, v in enumerate(value):
            out.extend(_leaves(v, (*path, i)))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(_leaves(v, (*path, k)))
    return out


def _cut(leaf: str | list[Any], keep: int) -> str | list[Any]:
    omitted = len(leaf) - keep
    if isinstance(leaf, str):
        return leaf[:keep] + _marker(omitted, "chars")
    return [*leaf[:keep], _marker(omitted, "items")]


def _shortest_cut(leaf: str | list[Any], max_tokens: int, max_bytes: int) -> str | list[Any]:
    """The longest cut of `leaf` whose JSON is within the given size (binary search on length)."""
    lo, hi = 0, len(leaf) - 1
    best = _cut(leaf, 0)
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = _cut(leaf, mid)
        tokens, nbytes = _size(candidate)
        if tokens <= max_tokens and nbytes <= max_bytes:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def shrink_to_fit(
    record: Any, max_tokens: int, max_bytes: int, *, uncut: frozenset[str] = frozenset()
) -> tuple[Any, bool]:
    """(`record` cut to fit the budget, whether anything was cut).

    Leaves are cut largest first, each at most once, so this ends after at most one pass over
    the leaves even when the budget cannot be met (the caller checks and warns). Leaves under
    the top-level keys `uncut` are never cut (a match's path: a cut one would name no file).
    """
    tokens, nbytes = _size(record)
    if tokens <= max_tokens and nbytes <= max_bytes:
        return record, False
    record = copy.deepcopy(record)
    done: set[tuple[Any, ...]] = set()
    while tokens > max_tokens or nbytes > max_bytes:
        candidates = [(p, v) for p, v in _leaves(record) if p not in done and len(v) > 0 and not (p and p[0] in uncut)]
        if not candidates:
            break
        path, leaf = max(candidates, key=lambda pv: _size(pv[1])[1])
        done.add(path)
        leaf_tokens, leaf_bytes = _size(leaf)
        new = _shortest_cut(
            leaf,
            leaf_tokens - (tokens - max_tokens) - _TOKEN_SLACK,
            leaf_bytes - (nbytes - max_bytes) - _BYTE_SLACK,
        )
        if not path:
            record = new
        else:
            parent = record
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = new
        tokens, nbytes = _size(record)
    return record, True
