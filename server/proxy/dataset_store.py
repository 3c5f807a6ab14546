"""Saved datasets: large proxied tool results kept as JSONL records plus a metadata file.

Layout, one folder per day:
    <data_dir>/datasets/YYYY/MM/DD/dataset_<id>_data.jsonl      one record per line, no header
    <data_dir>/datasets/YYYY/MM/DD/dataset_<id>_metadata.json   what it is (tool, server, schema, summary)

Why this shape: unlike offloaded pages (disposable, in the temp dir, a day's retention) these
are kept for weeks in the user's data dir and browsed by date, so the date is in the path.
The id is a ULID, whose timestamp names the day folder, so a dataset is found from its id
without a scan, and ids sort by creation time. The data file has no header line, so any JSONL
tool (DuckDB, jq, pandas) reads it as is; what the header would say is in the metadata.

Both files are written by `FileStore` (0600, atomic rename); the metadata file is written
last and is what makes a dataset exist, so a crash between the two leaves an orphan data file
that retention removes, never a dataset without its description.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ulid import ULID

from infra import open_regular_file
from server.errors import DatasetNotFoundError, StoreWriteError
from server.output import (
    DatasetFile,
    DatasetInfo,
    FileStore,
    check_id,
    dumps_bytes,
    dumps_lines,
    iso_timestamp,
    scandir,
    shrink_to_fit,
)
from server.settings import ProxySettings, default_of
from server.sql import DUCKDB_OBJECT_SIZE

_YEAR, _TWO_DIGITS = re.compile(r"^\d{4}$"), re.compile(r"^\d{2}$")
_MAX_METADATA_BYTES = 4 << 20
#: What a metadata file is cut to when written: well within what is read back.
_METADATA_BUDGET = 1 << 20
#: What a text result's records are (`{"line": 1, "text": "..."}`), so SQL need not infer it.
TEXT_LINE_COLUMNS = (("line", "BIGINT"), ("text", "VARCHAR"))
#: Retention runs at start-up and then this often; datasets live for days, so hourly is plenty.
SWEEP_INTERVAL_S = 3600.0


@dataclass(frozen=True, slots=True)
class SavedDataset:
    id: str
    data_path: Path
    metadata_path: Path


def created_at(dataset_id: str) -> datetime:
    """When the dataset was saved: the ULID's own timestamp (UTC). Built from `timestamp`, as
    `ULID.datetime` does: that property's annotation names itself, so type checkers see Any."""
    return datetime.fromtimestamp(ULID.from_str(dataset_id).timestamp, timezone.utc)


class DatasetStore(FileStore):
    """Writes, finds, lists and expires saved datasets under `<data_dir>/datasets`."""

    name = r"dataset_{id}_(?:data\.jsonl|metadata\.json)"
    label = "proxy.data_dir"

    def __init__(self, data_dir: Path, *, retention_days: float | None = None) -> None:
        """`retention_days`: `proxy.cleanup_after_days` (its default when not given, read now:
        `from_settings` passes the configured one)."""
        if retention_days is None:
            retention_days = default_of(ProxySettings, "cleanup_after_days")
        super().__init__(
            Path(data_dir) / "datasets", retention_s=retention_days * 86400.0, sweep_interval_s=SWEEP_INTERVAL_S
        )
        self.retention_days = retention_days

    @classmethod
    def from_settings(cls, settings: ProxySettings) -> DatasetStore:
        return cls(settings.data_dir, retention_days=settings.cleanup_after_days)

    def day_dir(self, dataset_id: str) -> Path:
        day = created_at(check_id(dataset_id))
        return self.root / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"

    # -- writing -----------------------------------------------------------------------------

    def save(
        self, dataset_id: str, records: Sequence[Any], description: dict[str, Any], *, as_json: bool = False
    ) -> SavedDataset:
        """Write `records` and their metadata (`description` plus what the store knows: id,
        timestamp, record_count, data file and size, and `as_json`: SQL reads each record as
        one JSON column, `DatasetFile.as_json`). Raises StoreWriteError."""
        folder = self.day_dir(dataset_id)
        data_name, meta_name = f"dataset_{dataset_id}_data.jsonl", f"dataset_{dataset_id}_metadata.json"
        body = dumps_lines(records)
        own = {
            "id": dataset_id,
            "timestamp": iso_timestamp(created_at(dataset_id)),
            "record_count": len(records),
            "data_file": data_name,
            "size_bytes": len(body),
            "max_record_bytes": _longest_line(body),
            "as_json": as_json,
        }
        meta = dumps_bytes({**own, **description})
        if len(meta) > _METADATA_BUDGET:
            # What the backend controls (envelope, field names, samples) cut to its first parts,
            # never the store's own keys: past `_MAX_METADATA_BYTES` a dataset reads as missing.
            kept = shrink_to_fit(
                {**description, **own}, len(meta), _METADATA_BUDGET, uncut=frozenset(own), objects=True
            )
            meta = dumps_bytes({**own, **kept[0]})
            if len(meta) > _METADATA_BUDGET:
                raise StoreWriteError(
                    f"the dataset's metadata takes {len(meta):,} bytes even cut, over {_METADATA_BUDGET:,}"
                )
        self._write(folder, [(data_name, (body,)), (meta_name, (meta,))])
        return SavedDataset(dataset_id, folder / data_name, folder / meta_name)

    # -- reading -------------------------------------------------------------------------------

    def metadata(self, dataset_id: str) -> dict[str, Any]:
        path = self.day_dir(dataset_id) / f"dataset_{dataset_id}_metadata.json"
        try:
            with open_regular_file(path, owned=True) as f:
                metadata = json.loads(f.read(_MAX_METADATA_BYTES))
            if not isinstance(metadata, dict):  # other JSON: not a metadata file this store wrote
                raise ValueError(f"{path} holds no JSON object")
            return metadata
        except (OSError, ValueError):
            raise DatasetNotFoundError(
                f"no saved dataset {dataset_id} in {self.root}: it expired (kept {self.retention_days:g} days) "
                "or was removed; call the tool again to recreate it"
            ) from None

    def open(self, dataset_id: str) -> DatasetFile:
        meta = self.metadata(dataset_id)
        path = self.day_dir(dataset_id) / str(meta.get("data_file", f"dataset_{dataset_id}_data.jsonl"))
        columns = TEXT_LINE_COLUMNS if meta.get("format") == "text_lines" else ()
        largest = int(meta.get("max_record_bytes", 0))
        return DatasetFile(
            dataset_id,
            path,
            int(meta.get("record_count", 0)),
            columns=columns,
            max_record_bytes=largest,
            as_json=meta.get("as_json") is True,
        )

    def _info(self, dataset_id: str, match: re.Match[str], st: os.stat_result) -> DatasetInfo:
        meta = self.metadata(dataset_id)
        return DatasetInfo(
            id=dataset_id,
            tool=str(meta.get("tool", "")),
            query=json.dumps(meta.get("arguments") or {}, ensure_ascii=False, separators=(",", ":")),
            created=str(meta.get("timestamp", "")),
            rows=int(meta.get("record_count", 0)),
            size_bytes=int(meta.get("size_bytes", 0)),
            server=str(meta.get("server", "")),
        )

    def _folders(self) -> list[Path]:
        """YYYY/MM/DD folders under the root, newest first; links and other names are skipped."""
        level: list[Path] = [self.root]
        for pattern in (_YEAR, _TWO_DIGITS, _TWO_DIGITS):
            level = [
                Path(e.path)
                for parent in level
                for e in sorted(scandir(parent), key=lambda e: e.name, reverse=True)
                if pattern.match(e.name) and e.is_dir(follow_symlinks=False)
            ]
        return level

    def _born(self, match: re.Match[str], st: os.stat_result) -> float:
        return created_at(match["id"]).timestamp()


def _longest_line(body: bytes) -> int:
    """The longest line of `body`, when that can matter: only a body over DuckDB's 16 MB record
    bound can hold a record over it. Measured between newlines, never copying the body."""
    if len(body) <= DUCKDB_OBJECT_SIZE:
        return 0
    longest = start = 0
    while (end := body.find(b"\n", start)) != -1:
        longest = max(longest, end - start)
        start = end + 1
    return max(longest, len(body) - start)
