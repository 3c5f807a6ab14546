"""Describing records of any width within a size budget: the largest field prefix that fits.

A description of data (the file_ref descriptor of an offloaded page, the proxy's answer for a
saved dataset) lists the fields and shows sample records. Both grow with the number of
fields, and a SQL row or a tool's record can have thousands, so "clip the long strings" alone
never bounds them. Both descriptions are built for the first `k` top-level fields instead,
with `k` the largest that keeps the whole answer within its budget; the fields left out are
counted and the answer says where to see them all. Field lists follow record key order, so the
fields kept are the ones a producer put first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

T = TypeVar("T")


def project(record: Any, names: Collection[str]) -> Any:
    """`record` with only the top-level keys in `names` (anything but an object as it is)."""
    if not isinstance(record, dict):
        return record
    return {k: v for k, v in record.items() if k in names}


def largest_fitting(build: Callable[[int], T], most: int, fits: Callable[[T], bool]) -> tuple[T, bool]:
    """(`build(k)` for the largest `k` in 0..`most` whose result `fits`, whether it fits).

    Binary search: the built answer grows with `k`. When not even `build(0)` fits, that floor is
    returned with False, so the caller can fall back to something smaller still."""
    whole = build(most)
    if fits(whole):
        return whole, True
    best: T | None = None
    lo, hi = 0, most - 1
    while lo <= hi:
        k = (lo + hi) // 2
        candidate = build(k)
        if fits(candidate):
            best, lo = candidate, k + 1
        else:
            hi = k - 1
    return (best, True) if best is not None else (build(0), False)


def omitted_fields_note(omitted: int, where: str) -> str:
    """What to tell an agent about the fields a description left out, and `where` they all are."""
    return f"and {omitted:,} more fields, not listed here to stay within the output limit: see {where}"
