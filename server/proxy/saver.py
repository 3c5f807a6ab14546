"""Saving one oversized proxied result as a dataset and answering with its description.

Runs on a worker thread (parsing, profiling and writing a large result is CPU and disk work
that must not stall the event loop serving other calls).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastmcp.tools.base import ToolResult

from server.errors import StoreWriteError
from server.output import clip_strings, dumps
from server.proxy.answer import saved_answer, truncated_answer
from server.proxy.dataset_store import DatasetStore
from server.proxy.extraction import Extracted, result_text
from server.proxy.profile import Profile, profile_records
from server.proxy.size import Size

log = logging.getLogger(__name__)
#: Arguments are kept in the metadata to tell datasets apart; long values (a file being
#: written, say) are clipped, they are not what identifies the call.
_ARGUMENT_CHARS = 500


@dataclass(frozen=True, slots=True)
class ProxiedCall:
    """One intercepted call: the backend's tool name, its server, the arguments sent, and the
    size of the result (as `size.wire_size` measures it)."""

    tool: str
    server: str
    arguments: dict[str, Any]
    size: Size


#: Records sampled to infer a saved dataset's field types (`profile.py` says how). Not a setting
#: (it was, and nobody set it): the sample is random, so 100 records find the types of
#: periodic tool output too, and profiling stays cheap on the call path.
SCHEMA_SAMPLE_SIZE = 100


class ResultSaver:
    """Profiles and stores intercepted results and builds the client's answer for each."""

    def __init__(
        self, store: DatasetStore, *, threshold_tokens: int, schema_sample_size: int = SCHEMA_SAMPLE_SIZE
    ) -> None:
        self.store = store
        self.threshold_tokens = threshold_tokens
        self.schema_sample_size = schema_sample_size

    def save(self, result: ToolResult, extracted: Extracted, call: ProxiedCall) -> ToolResult:
        """The compact answer for `result`, or, when it cannot be saved, its truncated start.

        Never raises: the backend produced a result, and a proxy fault (a full disk, a bug in
        profiling) must cost the agent the rest of that result, not the whole call."""
        try:
            profile = profile_records(extracted.records, sample_size=self.schema_sample_size)
            dataset_id = self.store.new_id()
            saved = self.store.save(
                dataset_id,
                extracted.records,
                self._description(extracted, profile, call),
                as_json=bool(profile.clashes),
            )
        except StoreWriteError as exc:
            log.warning("could not save the result of %s as a dataset: %s", call.tool, exc)
            return self._truncated(result, call, str(exc))
        except Exception as exc:  # see the docstring: never lose the backend's result to a proxy bug
            log.exception("saving the result of %s failed", call.tool)
            return self._truncated(result, call, f"internal error: {type(exc).__name__}")
        return saved_answer(
            saved,
            extracted,
            profile,
            tool=call.tool,
            server=call.server,
            size=call.size,
            threshold_tokens=self.threshold_tokens,
            retention_days=self.store.retention_days,
        )

    @staticmethod
    def _description(extracted: Extracted, profile: Profile, call: ProxiedCall) -> dict[str, Any]:
        return {
            "tool": call.tool,
            "server": call.server,
            "arguments": clip_strings(call.arguments, _ARGUMENT_CHARS),
            "original_size": call.size.bytes,
            "format": extracted.format,
            "records_from": extracted.records_from,
            "schema": profile.schema(),
            "summary": {
                "total_records": len(extracted.records),
                "sample_records": profile.sample_records,
                "distinct_values": profile.distinct_values,
            },
            "envelope": extracted.envelope,
        }

    def _truncated(self, result: ToolResult, call: ProxiedCall, why: str) -> ToolResult:
        text = result_text(result) or ""
        if not text and result.structured_content is not None:
            text = dumps(result.structured_content)
        return truncated_answer(
            text,
            tool=call.tool,
            server=call.server,
            size=call.size,
            threshold_tokens=self.threshold_tokens,
            why=why,
        )
