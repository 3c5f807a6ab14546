"""The files codepager keeps: `FileStore`, the one store of every file it writes (offloaded
pages and the proxy's saved datasets are its two kinds), and what a stored dataset is to its
readers (`DatasetFile`, `DatasetInfo`, `DatasetSource`), so SQL, listing and paging see every
kind alike.

Offloaded pages live in the user's runtime or cache dir and proxy datasets under the user's data
dir, by default; either may be set to a shared place, and both hold other programs' output, so
both are written the same careful way:
- the directory is created 0700 and must be a real directory we own (a symlink or a directory
  planted by another user is refused, never written into). One that already exists with
  looser permissions (a 0777 left by a careless mkdir) is tightened to 0700 before use; a
  shared directory (sticky bit, like /tmp itself) is refused instead, since tightening it
  would lock every other user out of it;
- a file is created 0600 with O_EXCL|O_NOFOLLOW relative to an open directory descriptor, so a
  swapped symlink cannot redirect the write, under a temporary name that is then renamed, so
  a reader never sees a torn file;
- listing (and therefore cleanup) only yields regular files we own whose name matches the
  caller's pattern, never following symlinks, so a foreign file is never touched.
No fsync: these are results that can be recomputed, and a flush per file would cost more than
the rest of the write.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Protocol

import msgspec
from ulid import ULID

from infra import NotRegularFileError, Sweeper, UnsafeDirectoryError, make_private, open_regular_file
from server.errors import DatasetNotFoundError, InvalidDatasetIdError, PrivateFileError, StoreWriteError

log = logging.getLogger(__name__)

#: A ULID as text: 128 bits in 26 Crockford base32 digits, so the first is at most 7.
ULID_PATTERN = r"[0-7][0-9A-HJKMNP-TV-Z]{25}"
_ID_RE = re.compile(ULID_PATTERN)
#: A temp file younger than this may still be being written by another thread; leave it.
_TEMP_GRACE_S = 600.0


def open_private_dir(path: Path, *, create: bool, label: str) -> int:
    """An O_NOFOLLOW descriptor of `path` after checking it is a directory we own.

    `label` names the setting the directory comes from, so the error tells the user what to fix.
    """
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise PrivateFileError(f"{label} {path} exists and is not a directory") from None
        except OSError as exc:
            raise PrivateFileError(f"cannot create {label} {path}: {exc.strerror or exc}") from exc
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PrivateFileError(
            f"cannot open {label} {path}: {exc.strerror or exc} (it must be a real directory, not a symlink)"
        ) from exc
    try:
        make_private(fd, path, label)
    except UnsafeDirectoryError as exc:
        os.close(fd)
        raise PrivateFileError(str(exc)) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomically(dir_fd: int, name: str, chunks: Iterable[bytes]) -> None:
    """Write `chunks` to `name` in the directory `dir_fd`, 0600, all or nothing (via `.NAME.tmp`)."""
    temp = f".{name}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.writelines(chunks)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise PrivateFileError(f"could not write {name}: {exc.strerror or exc}") from exc


def owned_files(
    pattern: re.Pattern[str], where: Path | int
) -> Iterator[tuple[os.DirEntry[str], os.stat_result, re.Match[str]]]:
    """Entries of `where` (a path or directory descriptor) named like `pattern` that are regular
    files we own; symlinks are never followed. An unreadable directory yields nothing."""
    uid = os.geteuid()
    for entry in scandir(where):
        m = pattern.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
            yield entry, st, m


def scandir(where: Path | int) -> list[os.DirEntry[str]]:
    """The entries of a directory (path or descriptor); none when it cannot be read."""
    try:
        with os.scandir(where) as it:
            return list(it)
    except OSError:
        return []


def iso_timestamp(moment: datetime) -> str:
    """`moment` as the UTC time stamp both kinds of file record (`2025-01-31T12:00:00.000Z`)."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_id(dataset_id: str) -> str:
    """`dataset_id` if it is a ULID; it becomes part of a file name, so nothing else passes
    (matched whole: `$` would let a trailing newline through). Its time must be a date, as every
    id we issue is: stores file datasets by the day of their id."""
    if not isinstance(dataset_id, str) or not _ID_RE.fullmatch(dataset_id) or not _dated(dataset_id):
        raise InvalidDatasetIdError(
            f"invalid result id {dataset_id!r}: expected the 26-character id from a file_ref "
            "(e.g. the part after codepager://results/)"
        )
    return dataset_id


def _dated(dataset_id: str) -> bool:
    """Whether the ULID's millisecond time stamp is a date Python can hold (up to year 9999)."""
    try:
        datetime.fromtimestamp(ULID.from_str(dataset_id).timestamp, timezone.utc)
    except (ValueError, OverflowError):
        return False
    return True


def dataset_view(dataset_id: str) -> str:
    """The SQL view a stored result is queried as: the name analyze-with-duckdb creates for it
    and every answer that points an agent at it spell it here."""
    return f"dataset_{dataset_id}"


@dataclass(frozen=True, slots=True)
class CleanupReport:
    removed_count: int = 0
    freed_bytes: int = 0
    files: list[str] = field(default_factory=list)


class FileStore:
    """Files we write under one private `root`, named by ULID ids: written all or nothing, read
    back as datasets (each kind of store is a `DatasetSource`), expired after `retention_s` by
    `cleanup`, which `sweeper` runs now and then. A kind says where its files are (`_folders`),
    what they are named (`name`), how old one is (`_born`) and how one reads (`_info`, `open`).
    `label` names the setting the root comes from, for error messages."""

    #: A file's name as a regex, `{id}` where its ULID goes.
    name: ClassVar[str]
    label: ClassVar[str]
    #: Our files and our interrupted writes (`write_atomically`'s `.NAME.tmp`); a match has `id`.
    names: ClassVar[re.Pattern[str]]
    temps: ClassVar[re.Pattern[str]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        body = cls.name.replace("{id}", f"(?P<id>{ULID_PATTERN})")
        cls.names, cls.temps = re.compile(f"^{body}$"), re.compile(rf"^\.{body}\.tmp$")

    def __init__(self, root: Path, *, retention_s: float, sweep_interval_s: float) -> None:
        self.root = Path(root)
        self.retention_s = retention_s
        self.sweeper = Sweeper(self.cleanup, sweep_interval_s, name=f"codepager-{self.label.split('.')[0]}-sweep")

    @staticmethod
    def new_id() -> str:
        return str(ULID())

    def _folders(self) -> list[Path]:
        raise NotImplementedError

    def _born(self, match: re.Match[str], st: os.stat_result) -> float:
        raise NotImplementedError

    def _info(self, dataset_id: str, match: re.Match[str], st: os.stat_result) -> DatasetInfo:
        raise NotImplementedError

    def infos(self) -> list[DatasetInfo]:
        """Every dataset, newest first (`_folders` lists the newest folder first); one removed
        or rewritten between listing and reading is left out."""
        out = []
        for folder in self._folders():
            found = {m["id"]: (m, st) for _, st, m in owned_files(self.names, folder)}
            for dataset_id in sorted(found, reverse=True):
                with contextlib.suppress(OSError, LookupError):
                    out.append(self._info(dataset_id, *found[dataset_id]))
        return out

    def _find(self, dataset_id: str) -> Path | None:
        """Our file named for `dataset_id` (which must be an id), found by listing."""
        check_id(dataset_id)
        for folder in self._folders():
            for entry, _, m in owned_files(self.names, folder):
                if m["id"] == dataset_id:
                    return folder / entry.name
        return None

    def _open_dir(self, folder: Path, *, create: bool) -> int:
        try:
            return open_private_dir(folder, create=create, label=self.label)
        except PrivateFileError as exc:
            raise StoreWriteError(str(exc)) from exc

    def _write(self, folder: Path, files: Sequence[tuple[str, Iterable[bytes]]]) -> None:
        """Write `files` (name, chunks) into `folder`, all or none: a failure removes the ones
        already written, so the last file, the one that makes a result exist, is never alone."""
        dir_fd = self._open_dir(folder, create=True)
        written: list[str] = []
        try:
            for name, chunks in files:
                write_atomically(dir_fd, name, chunks)
                written.append(name)
        except PrivateFileError as exc:
            for name in written:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            raise StoreWriteError(f"{exc} in {folder}") from exc
        finally:
            os.close(dir_fd)

    def cleanup(self, max_age_days: float | None = None) -> CleanupReport:
        """Remove our files older than `max_age_days` (default: the retention period), then the
        folders below the root left empty. Interrupted writes (temp files) go too, but only
        after a grace period, so a write in flight on another thread is never pulled from
        under it."""
        if max_age_days is not None and max_age_days < 0:
            raise ValueError(f"max_age_days must be >= 0, got {max_age_days}")
        max_age = self.retention_s if max_age_days is None else max_age_days * 86400.0
        now = time.time()
        removed: list[str] = []
        freed = 0
        for folder in self._folders():
            try:
                dir_fd = open_private_dir(folder, create=False, label=self.label)
            except PrivateFileError:
                continue
            try:
                for pattern, min_age in ((self.names, max_age), (self.temps, max(max_age, _TEMP_GRACE_S))):
                    for entry, st, m in owned_files(pattern, dir_fd):
                        if now - self._born(m, st) < min_age:
                            continue
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.name, dir_fd=dir_fd)
                            removed.append(str(folder / entry.name))
                            freed += st.st_size
            finally:
                os.close(dir_fd)
            for empty in itertools.takewhile(lambda p: p != self.root, (folder, *folder.parents)):
                with contextlib.suppress(OSError):
                    empty.rmdir()
        if removed:
            log.info("%s sweep removed %d files (%d bytes)", self.label, len(removed), freed)
        return CleanupReport(removed_count=len(removed), freed_bytes=freed, files=removed)


#: What line 1 of an offloaded page is (`"type": "codepager_header"`), not a record.
HEADER_TYPE = "codepager_header"


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """One line of `list-saved-datasets`. `server` is set for proxied results only (the search
    server's own offloaded pages have none), and is then listed."""

    id: str
    tool: str
    query: str
    created: str
    rows: int
    size_bytes: int
    server: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "view": dataset_view(self.id), "tool": self.tool}
        if self.server is not None:
            out["server"] = self.server
        out.update(query=self.query, created=self.created, rows=self.rows, size_bytes=self.size_bytes)
        return out


@dataclass(frozen=True, slots=True)
class DatasetFile:
    """A dataset's JSONL file and how to read it.

    `header` is true for offloaded pages (line 1 is the codepager header, not a record);
    `record_keys` are the records' top-level keys when known, which keeps header-only keys out
    of the SQL view; without them every key in the file is a column. `columns` are the
    records' DuckDB column types when the producer knows them (text lines): DuckDB then reads
    them instead of inferring them, which costs seconds per megabyte of a long string.
    `max_record_bytes`, when known, lets DuckDB read records over its 16 MB default (a proxied
    reply can be one 50 MB line); DuckDB sizes its buffers by it, so it must be the real size.
    `as_json` says the records' keys cannot all be columns (keys differing only in case, an
    empty key): SQL then reads each record as one JSON column. `header_keys` are the header
    line's keys, columns too as DuckDB reads the file.
    """

    id: str
    path: Path
    count: int
    header: bool = False
    record_keys: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    max_record_bytes: int = 0
    as_json: bool = False
    header_keys: tuple[str, ...] = ()

    def read(self, offset: int, limit: int) -> list[Any]:
        """Records `offset`..`offset + limit` (0-based), decoded; fewer at the end of the file."""
        skip = offset + (1 if self.header else 0)
        try:
            f = open_regular_file(self.path, owned=True)
        except (FileNotFoundError, PermissionError, NotRegularFileError):
            raise DatasetNotFoundError(f"dataset {self.id} was removed; recreate it") from None
        with f:
            lines = list(itertools.islice(f, skip, skip + limit))
        return [msgspec.json.decode(line) for line in lines]


class DatasetSource(Protocol):
    """A producer's saved datasets. `open` raises DatasetNotFoundError for an id it lacks."""

    def infos(self) -> list[DatasetInfo]: ...

    def open(self, dataset_id: str) -> DatasetFile: ...
