"""Offloaded pages: JSONL files written where an agent can read them with its own tools.

Format: line 1 is a header object (`"type": "codepager_header"`), every following line is one
record exactly as inline mode would have returned it, so `tail -n +2 FILE | jq ...` sees the
same objects the agent already knows. Files are disposable (a day's retention by default) and
live in one flat folder under the shared system temp dir, written and expired the careful way
`files` describes; writes also sweep now and then, so expiry needs no thread.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from infra import NotRegularFileError, open_regular_file
from server.errors import DatasetNotFoundError, LineRangeError, ReadTooLargeError, StoreWriteError
from server.output.files import HEADER_TYPE, DatasetFile, DatasetInfo, FileStore, iso_timestamp
from server.output.fit import clip_strings
from server.output.jsontext import MAX_ANSWER_BYTES, dumps_bytes, dumps_lines, estimate_tokens
from server.settings import OffloadSettings, default_of

SCHEMA_VERSION = 1
#: Where an MCP client reads an offloaded page: whole, or lines START-END (1-based, inclusive).
RESULTS_URI = "codepager://results/{id}"
LINES_URI = "codepager://results/{id}/lines/{start}-{end}"
_UNSAFE_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_HEADER_BYTES = 1 << 20
#: The header keeps the caller's query to be recognised, not re-run, no keys past this JSON size
#: (SQL then reads each line as one JSON column) and no cursor past half of it: `read_header` reads it.
_QUERY_CHARS, _MAX_KEYS_BYTES = 4096, _MAX_HEADER_BYTES // 2
#: Bytes copied at a time from a spool into the offloaded file.
_COPY_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class OffloadedFile:
    """A file just written: what the descriptor needs without re-reading it."""

    id: str
    path: Path
    size_bytes: int
    line_count: int
    header: dict[str, Any]


def safe_tool_name(tool: str) -> str:
    """A tool name usable inside a file name (proxied tools may be named anything)."""
    return _UNSAFE_TOOL_CHARS.sub("_", tool)[:64] or "tool"


#: How often expired offload files are swept. Not a setting (it was, and nobody set it): it only
#: decides how late after `offload.retention_hours` a file goes, at most ten minutes of hours.
SWEEP_INTERVAL_S = 600.0


class OffloadStore(FileStore):
    """Writes, finds, reads and expires offloaded JSONL files in one directory."""

    name = r"codepager-(?P<tool>[A-Za-z0-9_.-]{1,64})-{id}\.jsonl"
    label = "offload.output_dir"

    def __init__(
        self,
        output_dir: Path,
        *,
        retention_hours: float | None = None,
        sweep_interval_s: float = SWEEP_INTERVAL_S,
        max_read_bytes: int | None = None,
    ) -> None:
        """`retention_hours` is `[offload]`'s (its default when not given, read now:
        `from_settings` passes the configured one); `max_read_bytes`, `MAX_ANSWER_BYTES`."""
        hours = default_of(OffloadSettings, "retention_hours") if retention_hours is None else retention_hours
        super().__init__(output_dir, retention_s=hours * 3600.0, sweep_interval_s=sweep_interval_s)
        self.max_read_bytes = MAX_ANSWER_BYTES if max_read_bytes is None else max_read_bytes

    @classmethod
    def from_settings(cls, settings: OffloadSettings) -> OffloadStore:
        return cls(settings.output_dir, retention_hours=settings.retention_hours)

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        *,
        tool: str,
        query: str,
        records: Sequence[Any],
        page: int | None = None,
        next_cursor: str | None = None,
    ) -> OffloadedFile:
        """Write `records` as one JSONL file; raises StoreWriteError (never a bare OSError)."""
        body = dumps_lines(records)
        estimated = estimate_tokens(body.decode("utf-8"))
        header = self._header(tool, query, len(records), estimated, page, next_cursor, _top_level_keys(records))
        return self._write_file(header, (body,), len(body))

    def write_lines(
        self,
        *,
        tool: str,
        query: str,
        lines: Iterable[bytes],
        record_keys: Sequence[str] | Callable[[], Sequence[str]],
    ) -> OffloadedFile:
        """Write records that arrive as JSON lines (without newlines), without holding them.

        For results too large to hold (a whole SQL result, a search's whole result list): the
        header, which needs their count, comes first in the file, so they are spooled to an
        unnamed private temp file in the output dir and copied after it. `record_keys` may be a
        function, called once every line is spooled: a caller that learns the keys from the
        records it streams knows them only then. Raises StoreWriteError."""
        os.close(self._open_dir(self.root, create=True))  # checked ours and private: the spool may go there
        count = size = estimated = 0
        try:
            with tempfile.TemporaryFile(dir=self.root) as spool:
                for chunk in _joined(lines, _COPY_BYTES):  # estimated per chunk: within a token a MB
                    spool.write(chunk)
                    count, size = count + chunk.count(b"\n"), size + len(chunk)
                    estimated += estimate_tokens(chunk.decode("utf-8"))
                spool.seek(0)
                keys = list(record_keys() if callable(record_keys) else record_keys)
                header = self._header(tool, query, count, estimated, None, None, keys)
                return self._write_file(header, iter(functools.partial(spool.read, _COPY_BYTES), b""), size)
        except OSError as exc:
            raise StoreWriteError(f"could not spool results in {self.root}: {exc.strerror or exc}") from exc

    @staticmethod
    def _header(
        tool: str, query: str, count: int, estimated: int, page: int | None, next_cursor: str | None, keys: list[str]
    ) -> dict[str, Any]:
        keys = [] if len(dumps_bytes(keys)) > _MAX_KEYS_BYTES else keys
        if next_cursor is not None and len(next_cursor) > _MAX_KEYS_BYTES // 2:  # search filters can make it long
            next_cursor = "…[cut to keep the header readable: the answer's pagination.next_cursor has it]"
        return {
            "type": HEADER_TYPE,
            "tool": tool,
            "query": clip_strings(query, _QUERY_CHARS),
            "count": count,
            "schema_version": SCHEMA_VERSION,
            "timestamp": iso_timestamp(datetime.now(timezone.utc)),
            "estimated_tokens": estimated,
            "page": page,
            "next_cursor": next_cursor,
            "record_keys": keys,
        }

    def _write_file(self, header: dict[str, Any], body: Iterable[bytes], body_size: int) -> OffloadedFile:
        """The header line then `body` as a new file named after a fresh id."""
        dataset_id = self.new_id()
        head = dumps_bytes(header) + b"\n"
        name = f"codepager-{safe_tool_name(header['tool'])}-{dataset_id}.jsonl"
        self._write(self.root, [(name, itertools.chain((head,), body))])
        self.sweeper.maybe_sweep()
        return OffloadedFile(
            id=dataset_id,
            path=self.root / name,
            size_bytes=len(head) + body_size,
            line_count=header["count"] + 1,
            header=header,
        )

    # -- finding and reading -------------------------------------------------------------------

    def _folders(self) -> list[Path]:
        return [self.root] if self.root.is_dir() else []

    def _born(self, match: re.Match[str], st: os.stat_result) -> float:
        return st.st_mtime

    def path_of(self, dataset_id: str) -> Path:
        """The file of `dataset_id`, found by listing (its name also holds the tool)."""
        path = self._find(dataset_id)
        if path is not None:
            return path
        raise DatasetNotFoundError(
            f"no offloaded result {dataset_id} in {self.root}: it expired (retention "
            f"{self.retention_s / 3600:g} h) or was cleaned up; run the search again"
        )

    def read_header(self, dataset_id: str) -> dict[str, Any]:
        with self._open_file(dataset_id) as f:
            line = f.readline(_MAX_HEADER_BYTES)
        try:
            header = json.loads(line)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("type") != HEADER_TYPE:
            raise DatasetNotFoundError(f"{dataset_id} is not a codepager result file (no header line)")
        return header

    def read_whole(self, dataset_id: str) -> str:
        """The whole file as text (the `codepager://results/{id}` resource): `_read`."""
        return self._read(dataset_id, 1, None)

    def read_lines(self, dataset_id: str, start: int, end: int) -> str:
        """Lines `start`..`end` (1-based, inclusive; line 1 is the header), clamped at EOF: `_read`."""
        if start < 1 or end < start:
            raise LineRangeError(f"invalid line range {start}-{end}: use 1-based start <= end (line 1 is the header)")
        return self._read(dataset_id, start, end)

    def _read(self, dataset_id: str, start: int, end: int | None) -> str:
        """Lines `start`..`end` (to EOF when None) within `max_read_bytes`, the page ceiling (a read is
        one answer too: an audit saw 64 MiB sent whole), else ReadTooLargeError naming what fits."""
        limit, size, lines = self.max_read_bytes, 0, list[bytes]()
        with self._open_file(dataset_id) as f:
            collections.deque(itertools.islice(f, start - 1), maxlen=0)  # skip to line `start`
            while (end is None or start + len(lines) <= end) and (line := f.readline(limit - size + 1)):
                size += len(line)
                if size > limit:
                    window = LINES_URI.format(id=dataset_id, start=start, end=start + len(lines) - 1)
                    fits = f"read {window}, then the lines after it, or " if lines else ""
                    raise ReadTooLargeError(
                        f"lines {start}-{end or 'end'} of result {dataset_id} are over the {limit:,} bytes one read "
                        f"may return: {fits}query them with analyze-with-duckdb or read-dataset-page "
                        f"(dataset_id={dataset_id})"
                    )
                lines.append(line)
        if not lines:
            raise LineRangeError(
                f"line range {start}-{end} is past the end of result {dataset_id} (see its line_count)"
            )
        return b"".join(lines).decode("utf-8")

    @contextlib.contextmanager
    def _open_file(self, dataset_id: str) -> Iterator[BinaryIO]:
        path = self.path_of(dataset_id)
        try:
            f = open_regular_file(path, owned=True)
        except FileNotFoundError:
            raise DatasetNotFoundError(f"result {dataset_id} was removed; run the search again") from None
        except (PermissionError, NotRegularFileError):
            raise DatasetNotFoundError(f"result {dataset_id} is not a file codepager wrote") from None
        with f:
            yield f

    # -- as datasets (the header line says what a file holds) ----------------------------------

    def _info(self, dataset_id: str, match: re.Match[str], st: os.stat_result) -> DatasetInfo:
        header = self.read_header(dataset_id)
        tool, query = str(header.get("tool", match["tool"])), str(header.get("query", ""))
        return DatasetInfo(
            dataset_id, tool, query, str(header.get("timestamp", "")), int(header.get("count", 0)), st.st_size
        )

    def open(self, dataset_id: str) -> DatasetFile:
        path = self.path_of(dataset_id)
        header = self.read_header(dataset_id)
        keys = tuple(header.get("record_keys") or ())
        return DatasetFile(
            dataset_id, path, int(header.get("count", 0)), header=True, record_keys=keys, header_keys=tuple(header)
        )


def _joined(lines: Iterable[bytes], size: int) -> Iterator[bytes]:
    """`lines` joined into chunks of about `size` bytes, each line ending in a newline."""
    buffer = bytearray()
    for line in lines:
        buffer += line
        buffer += b"\n"
        if len(buffer) >= size:
            yield bytes(buffer)
            buffer = bytearray()
    if buffer:
        yield bytes(buffer)


def _top_level_keys(records: Sequence[Any]) -> list[str]:
    """Union of the records' top-level keys in first-seen order (used to build SQL views)."""
    keys: dict[str, Any] = {}
    for r in records:
        if type(r) is dict:
            keys.update(r)  # C-level key merge; the values are never read
    return list(keys)
