"""Aggregate statistics over a result list: the `stats_only` / `stats_first` block, and the
summary inside a file_ref descriptor.

Records are read in either match shape (`server.records`): full (`{"file": {"path",
"language"}, "match": {"score"}}`) or compact (`{"path", "line", "score"}`, the language
named from the path as the search named it); records of another shape (SQL rows, proxied
tool output) simply contribute to the count, so the same code serves every producer without
guessing at foreign fields.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from search_engine import language_for

TOP_FILES = 10


def _section(record: Any, key: str) -> dict[str, Any] | None:
    # Plain dict checks, not Mapping: records are parsed/built JSON, and this runs per record.
    section = record.get(key) if type(record) is dict else None
    return section if type(section) is dict else None


def _compact_path(record: Any) -> str | None:
    """The path of a compact match record (a string `path` beside an integer `line`)."""
    if type(record) is not dict or type(record.get("line")) is not int:
        return None
    path = record.get("path")
    return path if type(path) is str else None


def _file_field(record: Any, key: str) -> str | None:
    file = _section(record, "file")
    value = file.get(key) if file is not None else None
    return value if type(value) is str else None


def record_path(record: Any) -> str | None:
    compact = _compact_path(record)
    return compact if compact is not None else _file_field(record, "path")


def record_language(record: Any) -> str | None:
    compact = _compact_path(record)
    return language_for(compact) if compact is not None else _file_field(record, "language")


def record_score(record: Any) -> float | None:
    part = record if _compact_path(record) is not None else _section(record, "match")
    score = part.get("score") if part is not None else None
    if isinstance(score, (int, float)) and type(score) is not bool and math.isfinite(score):
        return float(score)
    return None


@dataclass(frozen=True, slots=True)
class Stats:
    """What an agent needs to decide how to dig into a result list without reading it."""

    total_count: int
    analyzed: int
    file_count: int
    top_files: list[tuple[str, int]]
    languages: dict[str, int]
    score_min: float | None
    score_max: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_count": self.total_count,
            "analyzed": self.analyzed,
            "file_count": self.file_count,
            "top_files": [{"path": p, "count": c} for p, c in self.top_files],
            "languages": self.languages,
            "score_range": None if self.score_min is None else {"min": self.score_min, "max": self.score_max},
        }


def compute_stats(records: Iterable[Any], *, total_count: int | None = None, top_files: int = TOP_FILES) -> Stats:
    """One pass over `records`.

    `total_count` is the true size of the result (it can exceed the records analyzed when the
    search stopped at max_results); it defaults to the number of records seen. Files tie-break
    by path so the block is deterministic.
    """
    per_file: Counter[str] = Counter()
    languages: Counter[str] = Counter()
    lo = hi = None
    n = 0
    for record in records:
        n += 1
        path = record_path(record)
        if path is not None:
            per_file[path] += 1
            languages[record_language(record) or "unknown"] += 1
        score = record_score(record)
        if score is not None:
            lo = score if lo is None or score < lo else lo
            hi = score if hi is None or score > hi else hi
    top = sorted(per_file.items(), key=lambda kv: (-kv[1], kv[0]))[:top_files]
    return Stats(
        total_count=n if total_count is None else total_count,
        analyzed=n,
        file_count=len(per_file),
        top_files=top,
        languages=dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
        score_min=lo,
        score_max=hi,
    )
