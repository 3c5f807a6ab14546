"""A search of several roots (`SearchRequest.roots`): one search in each, then one list.

A server started with several roots searches every one of them when no `path` picks one. Each
root is searched as a search of that root alone (`SearchRequest.in_root`), so every rule of a
one-root search holds in each (its ignore files, its index); the lists are then made one:

- each match's path becomes absolute (`in_root`), which says which root it is in, keeps two
  roots' `src/app.py` apart, and is what `path` takes to search that root again;
- regex results follow the roots' order, each root's in path order as ever, `max_results`
  counting over all of them and the total exact (each root's search counts all it finds);
- ranked results merge by score (`search_engine.ranking.ranked_result`);
- the index generation a cursor pins is the roots' generations combined
  (`combined_generation`), so a change in any root's index is a change of the search's.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Callable, Sequence

import msgspec

from search_engine.files import display_path
from search_engine.models import Match, SearchRequest, SearchResult

#: Bytes of the digest `combined_generation` keeps: a 48-bit number, exact in JSON and in a
#: double, like every other number a cursor carries.
_GENERATION_BYTES = 6


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
