"""Shared by the crafted-index tests (tests/test_crafted_index_*.py): build a real index of the
small index-test repository, find its live generation, craft its parts, and run one search in
a child process under an address-space cap, reporting what happened and its peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from search_engine.config import EngineConfig
from search_engine.embedding.embedder import Embedder
from search_engine.index.manager import IndexManager

REPO = Path(__file__).resolve().parents[1]
MB = 2**20


def build(repo: Path, cache: Path, embedder: Embedder) -> Path:
    """Index `repo` into `cache`; the live generation's directory."""
    manager = IndexManager(EngineConfig(cache_dir=cache), embedder=embedder)
    manager.update(repo)
    store = manager.store(repo)
    name = store.current_name()
    assert name is not None
    return store.directory / name


def strings(gen: Path) -> dict[str, Any]:
    value: dict[str, Any] = msgspec.msgpack.decode((gen / "chunks" / "strings.msgpack").read_bytes())
    return value


def put_strings(gen: Path, value: dict[str, Any]) -> None:
    (gen / "chunks" / "strings.msgpack").write_bytes(msgspec.msgpack.encode(value))


def replace_file_text(gen: Path, path: str, compressed: bytes) -> None:
    """Make `compressed` the stored (zlib) chunk text of file `path`, keeping every extent the
    generation checks consistent (text bounds shifted, text.bin rewritten)."""
    s = strings(gen)
    bounds = s["text_bounds"]
    data = (gen / "chunks" / "text.bin").read_bytes()
    blocks = [data[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
    blocks[s["paths"].index(path)] = compressed
    new = [0]
    for block in blocks:
        new.append(new[-1] + len(block))
    s["text_bounds"] = new
    put_strings(gen, s)
    (gen / "chunks" / "text.bin").write_bytes(b"".join(blocks))


def file_text(gen: Path, path: str) -> bytes:
    s = strings(gen)
    i = s["paths"].index(path)
    data = (gen / "chunks" / "text.bin").read_bytes()
    return zlib.decompress(data[s["text_bounds"][i] : s["text_bounds"][i + 1]])


def zlib_bomb(prefix: bytes, inflated_bytes: int) -> bytes:
    """`prefix` then zeros, `inflated_bytes` in all, deflated (~1000:1), built a MiB at a time."""
    packer = zlib.compressobj(9)
    parts = [packer.compress(prefix)]
    zeros = bytes(MB)
    parts += [packer.compress(zeros) for _ in range(inflated_bytes // MB)]
    parts.append(packer.flush())
    return b"".join(parts)


def manifest(gen: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((gen / "manifest.json").read_text())
    return value


def put_manifest(gen: Path, value: dict[str, Any]) -> None:
    (gen / "manifest.json").write_text(json.dumps(value))


def rows(gen: Path) -> np.ndarray:
    value: np.ndarray = np.load(gen / "chunks" / "rows.npy")
    return value


def put_rows(gen: Path, value: np.ndarray) -> None:
    np.save(gen / "chunks" / "rows.npy", value)


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from search_engine import SearchMode, SearchRequest
    from search_engine.config import EngineConfig
    from search_engine.engine import SearchEngine
    repo, cache, mode, query = sys.argv[1:5]
    engine = SearchEngine(EngineConfig(cache_dir=Path(cache)))
    started = time.perf_counter()
    out = {}
    try:
        result = engine.search(SearchRequest(mode=SearchMode(mode), query=query, root=repo))
        out["matches"] = [[m.path, m.content] for m in result.matches]
        out["generation"] = result.index_generation
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        engine.close()  # as every owner of an engine does: its chunking workers end with it
    out["seconds"] = time.perf_counter() - started
    # VmHWM, not ru_maxrss: that one keeps the high-water mark of the forked pytest process
    # across exec (a whole suite's 450 MB), this one is the child's own address space's.
    status = Path("/proc/self/status").read_text()
    out["peak_rss"] = int(status.split("VmHWM:")[1].split()[0]) * 1024
    print(json.dumps(out))
    """
)


def search_in_child(
    repo: Path,
    cache: Path,
    *,
    mode: str = "hybrid",
    query: str = "retry a failing call with backoff",
    address_space: int = 4 << 30,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """One search by a fresh process (its own SearchEngine over `cache`) whose address space is
    capped at `address_space` bytes, so a successful memory attack fails the child, not the
    machine. Returns the child's JSON report (matches or error, seconds, peak_rss), or
    {"timeout": True} when it had to be killed."""
    code = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))\n"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code + _CHILD, str(repo), str(cache), mode, query],
            env=env, capture_output=True, text=True, timeout=timeout_s, cwd=REPO,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"timeout": True}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return {"crashed": proc.returncode, "stderr": proc.stderr[-2000:]}
    report: dict[str, Any] = json.loads(lines[-1])
    return report
