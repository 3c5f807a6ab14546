"""`jq_filter` as a session view: the filter runs over the search's full list of match records
and what it keeps becomes a result list of its own, with its own session and cursors (the
Pager re-applies it when it restores a session from a cursor)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from search_engine import SearchResult
from server.errors import JqFilterError
from server.jq.sandbox import KEEP_ONLY, apply_jq
from server.records import match_from_record, match_record
from server.settings import OffloadSettings
from server.slots import Slots


def jq_view(settings: OffloadSettings) -> Callable[[SearchResult, str], SearchResult]:
    """The view; its filters share `offload.jq_max_concurrent` workers (the server makes one)."""
    workers = Slots(settings.jq_max_concurrent)

    def view(result: SearchResult, expression: str) -> SearchResult:
        records = [match_record(m) for m in result.matches]
        kept = apply_jq(
            records,
            expression,
            timeout_s=settings.jq_timeout_s,
            memory_mb=settings.jq_memory_mb,
            keep_only=True,
            workers=workers,
        )
        if len(kept) > len(records):
            raise JqFilterError(f"jq_filter turned {len(records)} matches into {len(kept)}: {KEEP_ONLY}")
        try:
            matches = [match_from_record(r) for r in kept]
        except ValueError as exc:
            raise JqFilterError(
                "jq_filter must keep match objects (filter, sort or slice them), but it produced something "
                f"else: {exc}. To reshape results, use output_mode=file_ref and run jq on the file instead"
            ) from None
        warning = f"jq_filter kept {len(matches)} of {len(result.matches)} matches"
        return replace(result, matches=matches, warnings=[*result.warnings, warning])

    return view
