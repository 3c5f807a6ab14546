"""Making answers fit a size budget: the one binary search and the visible last-resort cut of
a single record.

Everything the layer and the proxy send grows with something they can choose: records in a
page, fields in a descriptor (`describe`), characters of a cut string. Each picks the largest
choice whose whole answer fits, by `last_fitting`.

When even a single record is over the limit, cutting a page to zero records would hand back
a cursor pointing at the same record forever, so instead its largest strings (or lists) are
cut, each marked in place with how much was left out (`shrink_to_fit`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from server.output.jsontext import byte_size, dumps, estimate_tokens

T = TypeVar("T")
#: Slack for the token estimate not being exactly additive (ceil per part).
_TOKEN_SLACK = 2
_BYTE_SLACK = 8


def last_fitting(build: Callable[[int], T], lo: int, hi: int, fits: Callable[[T], bool]) -> T | None:
    """`build(k)` for the largest `k` in `lo`..`hi` whose result `fits`, or None. Binary search:
    the built answer must grow with `k`, so that it fits up to some `k` and not beyond."""
    best: T | None = None
    while lo <= hi:
        k = (lo + hi) // 2
        candidate = build(k)
        if fits(candidate):
            best, lo = candidate, k + 1
        else:
            hi = k - 1
    return best


def largest_fitting(build: Callable[[int], T], most: int, fits: Callable[[T], bool]) -> tuple[T, bool]:
    """(`build(k)` for the largest `k` in 0..`most` whose result `fits`, whether it fits). When
    not even `build(0)` fits, that floor is returned with False, so the caller can fall back to
    something smaller still."""
    whole = build(most)
    if fits(whole):
        return whole, True
    best = last_fitting(build, 0, most - 1, fits)
    return (best, True) if best is not None else (build(0), False)


def project(record: Any, names: Collection[str]) -> Any:
    """`record` with only the top-level keys in `names` (anything but an object as it is)."""
    if not isinstance(record, dict):
        return record
    return {k: v for k, v in record.items() if k in names}


def _marker(omitted: int, unit: str) -> str:
    return f"…[cut {omitted} {unit} to fit the output limit]"


def clip_strings(value: Any, max_chars: int) -> Any:
    """A copy of `value` with every string longer than `max_chars` cut and marked."""
    if isinstance(value, str):
        return value if len(value) <= max_chars else value[:max_chars] + _marker(len(value) - max_chars, "chars")
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


def _objects(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every object inside `value`, itself included, with the key path leading to it."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(value, (dict, list)):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            out.extend(_objects(v, (*path, k)))
        if isinstance(value, dict):
            out.append((path, value))
    return out


#: The member that takes the place of an object's cut members.
CUT_KEY = "…"


def _cut(leaf: str | list[Any] | dict[str, Any], keep: int) -> str | list[Any] | dict[str, Any]:
    omitted = len(leaf) - keep
    if isinstance(leaf, str):
        return leaf[:keep] + _marker(omitted, "chars")
    if isinstance(leaf, dict):
        return {**dict(itertools.islice(leaf.items(), keep)), CUT_KEY: _marker(omitted, "members")}
    return [*leaf[:keep], _marker(omitted, "items")]


def _longest_cut(leaf: Any, max_tokens: int, max_bytes: int) -> Any:
    """The longest cut of `leaf` whose JSON is within the given size."""

    def fits(cut: Any) -> bool:
        tokens, nbytes = _size(cut)
        return tokens <= max_tokens and nbytes <= max_bytes

    return last_fitting(lambda keep: _cut(leaf, keep), 0, len(leaf) - 1, fits) or _cut(leaf, 0)


def _at(record: Any, path: tuple[Any, ...]) -> Any:
    """What `path` leads to in `record` now (None if a cut took it away)."""
    for key in path:
        try:
            record = record[key]
        except (KeyError, IndexError, TypeError):
            return None
    return record


def _cut_pass(
    record: Any,
    candidates: list[tuple[tuple[Any, ...], Any]],
    size: tuple[int, int],
    budget: tuple[int, int],
) -> tuple[Any, tuple[int, int]]:
    """Cut `candidates` (paths into `record`) in order, each at most once and only while the
    record is over `budget`, each to what is left of the excess. The excess is kept by
    difference (a leaf measured before and after its cut), never by measuring the whole
    record again, so a pass costs O(n log n) in the record's size however many leaves it cuts:
    re-measuring after every cut made a record of 5,000 short members take 22 s."""
    (tokens, nbytes), (max_tokens, max_bytes) = size, budget
    for path, leaf in candidates:
        if tokens <= max_tokens and nbytes <= max_bytes:
            break
        if _at(record, path) is not leaf:  # inside a list or object cut before
            continue
        leaf_tokens, leaf_bytes = _size(leaf)
        new = _longest_cut(
            leaf, leaf_tokens - (tokens - max_tokens) - _TOKEN_SLACK, leaf_bytes - (nbytes - max_bytes) - _BYTE_SLACK
        )
        new_tokens, new_bytes = _size(new)
        if new_bytes >= leaf_bytes:  # a marker longer than what it would replace
            continue
        if not path:
            record = new
        else:
            _at(record, path[:-1])[path[-1]] = new
        # +1: a part's token estimate is rounded up on its own, so differences drift by up to a
        # token a cut; counting it keeps the pass from stopping a few tokens over the budget
        tokens, nbytes = tokens - leaf_tokens + new_tokens + 1, nbytes - leaf_bytes + new_bytes
    return record, _size(record)


def shrink_to_fit(
    record: Any, max_tokens: int, max_bytes: int, *, uncut: frozenset[str] = frozenset(), objects: bool = False
) -> tuple[Any, bool]:
    """(`record` cut to fit the budget, whether anything was cut).

    Strings and lists are cut largest first, each at most once, so this ends after one pass
    over them even when the budget cannot be met (the caller checks and warns). With
    `objects`, objects are cut next, the widest first and the record itself last, down to
    their first members: what is left over when the size is in many short members (a map of
    5,000 keys). Leaves under the top-level keys `uncut` are never cut (a match's path: a cut
    one would name no file).
    """
    size = _size(record)
    budget = (max_tokens, max_bytes)
    if size[0] <= max_tokens and size[1] <= max_bytes:
        return record, False
    record = copy.deepcopy(record)

    def cuttable(found: list[tuple[tuple[Any, ...], Any]]) -> list[tuple[tuple[Any, ...], Any]]:
        return [(p, v) for p, v in found if len(v) > 0 and not (p and p[0] in uncut)]

    leaves = sorted(cuttable(_leaves(record)), key=lambda pv: _size(pv[1])[1], reverse=True)
    record, size = _cut_pass(record, leaves, size, budget)
    if objects and (size[0] > max_tokens or size[1] > max_bytes):
        # the record itself last, and only when none of its members is `uncut`
        found = cuttable([(p, v) for p, v in _objects(record) if p or not uncut])
        inner = sorted(found, key=lambda pv: (not pv[0], -len(pv[1])))
        record, size = _cut_pass(record, inner, size, budget)
    return record, True
