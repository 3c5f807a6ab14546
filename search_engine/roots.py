"""A search of several roots (`SearchRequest.roots`): one search in each, then one list.

A server started with several roots searches every one of them when no `path` picks one. Each
root is searched as a search of that root alone (`SearchRequest.in_root`), so every rule of a
one-root search holds in each (its ignore files, its index); the lists are then made one:

- each match's path becomes absolute (`in_root`), which says which root it is in, keeps two
  roots' `src/app.py` apart, and is what `path` takes to search that root again;
- regex results follow the roots' order, each root's in path order as ever, `max_results`
  counting over all of them and the total exact (each root's search counts all it finds);
- ranked results merge by score (`search_engine.ranking.search.ranked_result`);
- the index generation a cursor pins is the roots' generations combined
  (`combined_generation`), so a change in any root's index is a change of the search's (and
  there is none while any root's files are not settled in its index);
- what the answer says of the files' state is the least settled root's
  (`combined_freshness`), with each root's pending paths made absolute;
- a later page rechecks each match in its own root (`recheck_across`).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Callable, Sequence

import msgspec

from search_engine.files.discovery import display_path
from search_engine.models import Freshness, FreshnessState, Match, SearchRequest, SearchResult

#: Bytes of the digest `combined_generation` keeps: a 48-bit number, exact in JSON and in a
#: double, like every other number a cursor carries.
_GENERATION_BYTES = 6
#: The states of `Freshness` that say the results may not reflect every change, the one an
#: agent can act on first (pending paths named: search again shortly).
_LEAST_SETTLED_FIRST: tuple[FreshnessState, ...] = ("updating", "unverified")


def in_root(root: str, matches: Sequence[Match]) -> list[Match]:
    """`matches` of a search of `root` alone, with their paths made absolute."""
    shown = display_path(os.fsencode(root))
    return [msgspec.structs.replace(m, path=posixpath.join(shown, m.path)) for m in matches]


def combined_generation(generations: Sequence[int]) -> int:
    """One index generation for a search of several roots: the one root's generation, or a
    48-bit digest of all of them in order, which changes when any of them does."""
    if len(generations) == 1:
        return generations[0]
    digest = hashlib.blake2b(",".join(map(str, generations)).encode(), digest_size=_GENERATION_BYTES).digest()
    return int.from_bytes(digest, "big")


def regex_across(request: SearchRequest, search: Callable[[SearchRequest], SearchResult]) -> SearchResult:
    """A regex `request` of several roots, `search` running it in each: the roots' matches in
    their order, up to `max_results` in all (a root after the limit is reached is still searched,
    for at most one match, so the total stays exact), warnings prefixed with their root."""
    matches: list[Match] = []
    total, warnings, took_ms = 0, [], 0.0
    for root in request.roots:
        room = request.max_results - len(matches)
        result = search(request.in_root(root).model_copy(update={"max_results": max(room, 1)}))
        matches += in_root(root, result.matches[:room])
        total += result.total_count
        warnings += [f"{root}: {warning}" for warning in result.warnings]
        took_ms += result.search_time_ms
    return SearchResult(
        matches=matches, total_count=total, truncated=total > len(matches), search_time_ms=took_ms, warnings=warnings
    )


def combined_freshness(parts: Sequence[tuple[str | None, Freshness]]) -> Freshness | None:
    """What the results of several roots reflect (`parts`: each root's label and freshness;
    a label of None is the only root's, returned as it is): the least settled state
    (`updating`, then `unverified`), the oldest times, polling if any root polls, every
    pending path (made absolute) and reason (prefixed with its root)."""
    if len(parts) <= 1 or parts[0][0] is None:
        return parts[0][1] if parts else None
    every = [f for _, f in parts]
    state: FreshnessState = next((s for s in _LEAST_SETTLED_FIRST if any(f.state == s for f in every)), "current")
    detections = {f.detection for f in every}
    reasons = [f"{root}: {f.reason}" for root, f in parts if f.reason]
    return Freshness(
        state,
        min(f.as_of for f in every),
        min(f.verified_at for f in every),
        detections.pop() if len(detections) == 1 else "polling",
        sum(f.pending_count for f in every),
        [posixpath.join(display_path(os.fsencode(root or "")), p) for root, f in parts for p in f.pending],
        "; ".join(reasons) or None,
    )


def recheck_across(
    request: SearchRequest, matches: Sequence[Match], recheck: Callable[[str, list[Match]], list[Match]]
) -> list[Match]:
    """`matches` of a search of several roots (absolute paths) rechecked in their own roots:
    `recheck(root, matches)` sees paths inside `root`, and what it returns is made absolute
    again, in place."""
    out = list(matches)
    for root in request.roots:
        prefix = display_path(os.fsencode(root)).rstrip("/") + "/"
        places = [i for i, m in enumerate(matches) if m.path.startswith(prefix)]
        inside = [msgspec.structs.replace(matches[i], path=matches[i].path[len(prefix) :]) for i in places]
        for i, match in zip(places, in_root(root, recheck(root, inside)) if inside else [], strict=True):
            out[i] = match
    return out
