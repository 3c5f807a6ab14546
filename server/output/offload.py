"""Offloaded result files: JSONL pages written where an agent can read them with its own tools.

Format: line 1 is a header object (`"type": "codepager_header"`), every following line is one
record exactly as inline mode would have returned it, so `tail -n +2 FILE | jq ...` sees the
same objects the agent already knows.

Safety, because the default directory lives under the shared system temp dir:
- the directory is created 0700 and must be owned by us (a directory planted by another user
  is refused, never written into); files are created 0600 with O_EXCL|O_NOFOLLOW relative to
  an open directory descriptor, so a swapped symlink cannot redirect a write;
- a file is written under a temporary name and renamed, so a reader never sees a torn file;
- cleanup only removes regular files whose name matches our pattern and which we own, never
  following symlinks, so a foreign file in the same directory is never touched.
(The primitives are `server.output.private_files`, shared with the proxy's dataset store.)
No fsync: these are disposable caches of results that can be recomputed, and a flush per page
would cost more than the rest of the write.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ulid import ULID

from server.output.jsontext import dumps_bytes, dumps_lines
from server.output.private_files import PrivateFileError, open_owned, open_private_dir, owned_files, write_atomically
from server.output.tokens import estimate_tokens
from server.settings import OffloadSettings

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
HEADER_TYPE = "codepager_header"
ULID_PATTERN = r"[0-9A-HJKMNP-TV-Z]{26}"
_ID_RE = re.compile(rf"^{ULID_PATTERN}$")
_FILE_RE = re.compile(rf"^codepager-(?P<tool>[A-Za-z0-9_.-]{{1,64}})-(?P<id>{ULID_PATTERN})\.jsonl$")
_TEMP_RE = re.compile(rf"^\.codepager-[A-Za-z0-9_.-]{{1,64}}-{ULID_PATTERN}\.jsonl\.tmp$")
_UNSAFE_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
#: A temp file younger than this may still be being written by another thread; leave it.
_TEMP_GRACE_S = 600.0
_MAX_HEADER_BYTES = 1 << 20
#: Bytes copied at a time from a spool into the offloaded file.
_COPY_BYTES = 1 << 20


class OffloadError(RuntimeError):
    """A page could not be written to a file. The layer falls back to an inline page."""


class InvalidDatasetIdError(ValueError):
    """An id that cannot name an offloaded file (it must be a 26-character ULID)."""


class DatasetNotFoundError(LookupError):
    """No offloaded file has this id (never written, expired, or cleaned up)."""


@dataclass(frozen=True, slots=True)
class OffloadedFile:
    """A file just written: what the descriptor needs without re-reading it."""

    id: str
    path: Path
    tool: str
    size_bytes: int
    line_count: int
    estimated_tokens: int
    header: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One of our files found in the output directory."""

    id: str
    tool: str
    path: Path
    size_bytes: int
    mtime: float


@dataclass(frozen=True, slots=True)
class CleanupReport:
    removed_count: int = 0
    freed_bytes: int = 0
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"removed_count": self.removed_count, "freed_bytes": self.freed_bytes, "files": list(self.files)}


def check_id(dataset_id: str) -> str:
    """`dataset_id` if it is a ULID; it becomes part of a file name, so nothing else passes."""
    if not isinstance(dataset_id, str) or not _ID_RE.match(dataset_id):
        raise InvalidDatasetIdError(
            f"invalid result id {dataset_id!r}: expected the 26-character id from a file_ref "
            "(e.g. the part after codepager://results/)"
        )
    return dataset_id


def safe_tool_name(tool: str) -> str:
    """A tool name usable inside a file name (proxied tools may be named anything)."""
    return _UNSAFE_TOOL_CHARS.sub("_", tool)[:64] or "tool"


class OffloadStore:
    """Writes, finds, reads and expires offloaded JSONL files in one directory."""

    def __init__(self, output_dir: Path, *, retention_hours: float = 24.0, sweep_interval_s: float = 600.0) -> None:
        self.output_dir = Path(output_dir)
        self.retention_s = retention_hours * 3600.0
        self.sweep_interval_s = sweep_interval_s
        self._last_sweep = float("-inf")
        self._sweep_lock = threading.Lock()
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    @classmethod
    def from_settings(cls, settings: OffloadSettings) -> OffloadStore:
        return cls(
            settings.output_dir, retention_hours=settings.retention_hours, sweep_interval_s=settings.sweep_interval_s
        )

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
        """Write `records` as one JSONL file; raises OffloadError (never a bare OSError)."""
        body = dumps_lines(records)
        estimated = estimate_tokens(body.decode("utf-8"))
        header = self._header(tool, query, len(records), estimated, page, next_cursor, _top_level_keys(records))
        return self._write_file(header, (body,), len(body))

    def write_lines(self, *, tool: str, query: str, lines: Iterable[bytes], record_keys: list[str]) -> OffloadedFile:
        """Write records that arrive as JSON lines (without newlines), without holding them.

        For results too large to hold (a whole SQL result): the header, which needs their count,
        comes first in the file, so they are spooled to an unnamed private temp file in the
        output dir and copied after it. Raises OffloadError."""
        os.close(self._open_dir(create=True))  # checked ours and private: the spool may go there
        count = size = estimated = 0
        try:
            with tempfile.TemporaryFile(dir=self.output_dir) as spool:
                for chunk in _joined(lines, _COPY_BYTES):  # estimated per chunk: within a token a MB
                    spool.write(chunk)
                    count, size = count + chunk.count(b"\n"), size + len(chunk)
                    estimated += estimate_tokens(chunk.decode("utf-8"))
                spool.seek(0)
                header = self._header(tool, query, count, estimated, None, None, record_keys)
                return self._write_file(header, iter(functools.partial(spool.read, _COPY_BYTES), b""), size)
        except OSError as exc:
            raise OffloadError(f"could not spool results in {self.output_dir}: {exc.strerror or exc}") from exc

    @staticmethod
    def _header(
        tool: str, query: str, count: int, estimated: int, page: int | None, next_cursor: str | None, keys: list[str]
    ) -> dict[str, Any]:
        return {
            "type": HEADER_TYPE,
            "tool": tool,
            "query": query,
            "count": count,
            "schema_version": SCHEMA_VERSION,
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "estimated_tokens": estimated,
            "page": page,
            "next_cursor": next_cursor,
            "record_keys": keys,
        }

    def _write_file(self, header: dict[str, Any], body: Iterable[bytes], body_size: int) -> OffloadedFile:
        """The header line then `body` as a new file named after a fresh id."""
        dataset_id = str(ULID())
        head = dumps_bytes(header) + b"\n"
        name = f"codepager-{safe_tool_name(header['tool'])}-{dataset_id}.jsonl"
        self._write_atomically(name, itertools.chain((head,), body))
        self._maybe_sweep()
        return OffloadedFile(
            id=dataset_id,
            path=self.output_dir / name,
            tool=header["tool"],
            size_bytes=len(head) + body_size,
            line_count=header["count"] + 1,
            estimated_tokens=header["estimated_tokens"],
            header=header,
        )

    def _write_atomically(self, name: str, chunks: Iterable[bytes]) -> None:
        dir_fd = self._open_dir(create=True)
        try:
            write_atomically(dir_fd, name, chunks)
        except PrivateFileError as exc:
            raise OffloadError(f"{exc} in {self.output_dir}") from exc
        finally:
            os.close(dir_fd)

    def _open_dir(self, *, create: bool) -> int:
        """An O_NOFOLLOW descriptor of the output dir, after checking it is ours."""
        try:
            return open_private_dir(self.output_dir, create=create, label="offload.output_dir")
        except PrivateFileError as exc:
            raise OffloadError(str(exc)) from exc

    # -- finding and reading -------------------------------------------------------------------

    def files(self) -> list[StoredFile]:
        """Our files in the output dir, oldest first (empty when the dir does not exist)."""
        if not self.output_dir.is_dir():
            return []
        found = [
            StoredFile(m["id"], m["tool"], Path(e.path), st.st_size, st.st_mtime)
            for e, st, m in owned_files(_FILE_RE, self.output_dir)
        ]
        return sorted(found, key=lambda f: f.id)

    def find(self, dataset_id: str) -> StoredFile:
        check_id(dataset_id)
        for f in self.files():
            if f.id == dataset_id:
                return f
        raise DatasetNotFoundError(
            f"no offloaded result {dataset_id} in {self.output_dir}: it expired (retention "
            f"{self.retention_s / 3600:g} h) or was cleaned up; run the search again"
        )

    def path_of(self, dataset_id: str) -> Path:
        return self.find(dataset_id).path

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
        """The whole file as text (the `codepager://results/{id}` resource)."""
        with self._open_file(dataset_id) as f:
            return f.read().decode("utf-8")

    def read_lines(self, dataset_id: str, start: int, end: int) -> str:
        """Lines `start`..`end` (1-based, inclusive; line 1 is the header), clamped at EOF."""
        if start < 1 or end < start:
            raise ValueError(f"invalid line range {start}-{end}: use 1-based start <= end (line 1 is the header)")
        with self._open_file(dataset_id) as f:
            chunk = list(itertools.islice(f, start - 1, end))
        if not chunk:
            raise ValueError(f"line range {start}-{end} is past the end of result {dataset_id}")
        return b"".join(chunk).decode("utf-8")

    @contextlib.contextmanager
    def _open_file(self, dataset_id: str) -> Iterator[Any]:
        path = self.find(dataset_id).path
        try:
            with open_owned(path) as f:
                yield f
        except FileNotFoundError:
            raise DatasetNotFoundError(f"result {dataset_id} was removed; run the search again") from None
        except PermissionError:
            raise DatasetNotFoundError(f"result {dataset_id} is not a file codepager wrote") from None

    # -- expiry --------------------------------------------------------------------------------

    def cleanup(self, max_age_days: float | None = None) -> CleanupReport:
        """Remove our files older than `max_age_days` (default: the retention period).

        Interrupted writes (`.tmp` files) are removed too, but only once they are older than a
        grace period, so a write in flight on another thread is never pulled from under it.
        """
        if max_age_days is not None and max_age_days < 0:
            raise ValueError(f"max_age_days must be >= 0, got {max_age_days}")
        max_age = self.retention_s if max_age_days is None else max_age_days * 86400.0
        if not self.output_dir.is_dir():
            return CleanupReport()
        now = time.time()
        removed: list[str] = []
        freed = 0
        with self._sweep_lock:
            self._last_sweep = time.monotonic()
            try:
                dir_fd = self._open_dir(create=False)
            except OffloadError:
                return CleanupReport()
            try:
                for pattern, min_age in ((_FILE_RE, max_age), (_TEMP_RE, max(max_age, _TEMP_GRACE_S))):
                    for entry, st, _ in owned_files(pattern, dir_fd):
                        if now - st.st_mtime < min_age:
                            continue
                        try:
                            os.unlink(entry.name, dir_fd=dir_fd)
                        except FileNotFoundError:
                            continue
                        removed.append(str(self.output_dir / entry.name))
                        freed += st.st_size
            finally:
                os.close(dir_fd)
        return CleanupReport(removed_count=len(removed), freed_bytes=freed, files=removed)

    def _maybe_sweep(self) -> None:
        """Expire old files now and then as a side effect of writing (no sweeper needed)."""
        if time.monotonic() - self._last_sweep >= self.sweep_interval_s:
            self._sweep_quietly()

    def _sweep_quietly(self) -> None:
        try:
            report = self.cleanup()
        except Exception:  # a failed sweep must never fail a tool call or kill the sweeper
            log.exception("offload sweep of %s failed", self.output_dir)
            return
        if report.removed_count:
            log.info("offload sweep removed %d files (%d bytes)", report.removed_count, report.freed_bytes)

    def start_sweeper(self) -> None:
        """Sweep now and then every `sweep_interval_s` on a daemon thread, until `close()`."""
        if self._sweeper is not None:
            return
        self._stop.clear()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="codepager-offload-sweep", daemon=True)
        self._sweeper.start()

    def _sweep_loop(self) -> None:
        while True:
            self._sweep_quietly()
            if self._stop.wait(self.sweep_interval_s):
                return

    def close(self) -> None:
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=5)
            self._sweeper = None


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
