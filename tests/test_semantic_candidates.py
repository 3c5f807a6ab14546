"""Semantic mode over an index where a few long files hold most of the chunks like the query:
the results still cover the other files about it (real chunker, the real shipped static model,
real persistent index)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.hits import diversify, saturated
from search_engine.models import SearchMode, SearchRequest
from search_engine.semantic import CANDIDATES

QUERY = "send bytes through a pipe between two processes"
LONG_FILES = ("ipc/pipe_unix.py", "ipc/pipe_windows.py", "ipc/pipe_posix.py")
# Enough functions that the long files alone hold more than CANDIDATES chunks like the query.
FUNCTIONS_PER_LONG_FILE = CANDIDATES // 2
SHORT_FILES = {
    "ipc/channel.py": "def open_channel(reader, writer):\n"
    '    """Connect two processes with a pipe and send bytes from one to the other."""\n'
    "    return writer.send(reader.recv())\n",
    "ipc/socketpair.py": "def socket_pair():\n"
    '    """Two connected sockets that carry bytes between a parent and a child process."""\n'
    "    return make_pair()\n",
    "ipc/spawn.py": "def spawn_with_pipe(command):\n"
    '    """Start a child process whose stdin is a pipe the parent writes bytes to."""\n'
    "    return start(command, stdin=PIPE)\n",
}


def _long_file(flavour: str) -> str:
    return "\n\n".join(
        f"def write_pipe_{flavour}_{n}(fd, data):\n"
        f'    """Write bytes to pipe {n} so the other process reads them ({flavour} variant)."""\n'
        f"    return os.write(fd, data[{n}:])\n"
        for n in range(FUNCTIONS_PER_LONG_FILE)
    )


def test_long_files_full_of_look_alikes_do_not_crowd_out_the_other_files(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "repo"
    files = {path: _long_file(path.rsplit("_", 1)[1][:-3]) for path in LONG_FILES} | SHORT_FILES
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    engine = SearchEngine(EngineConfig(cache_dir=model_cache))
    request = SearchRequest(mode=SearchMode.SEMANTIC, query=QUERY, root=str(root.resolve()), top_k=10)
    index = engine.indexes.get(root.resolve())
    assert len(index.chunks) > CANDIDATES + len(SHORT_FILES)
    paths = [m.path for m in engine.search(request).matches]
    # Each long file's further chunks keep a fraction of their score per chunk shown before
    # them, so every file about the query comes before the long files' third chunks.
    assert set(paths[: len(files)]) == set(files)


def test_saturated_scores_order_candidates_as_the_per_file_selection_does() -> None:
    """`diversify`'s top k are the top k of `saturated`: cutting a candidate list by it loses
    nothing the selection would have chosen."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 60))
        file_of = rng.integers(0, 6, size=n)
        scores = rng.normal(0.2, 0.4, size=n)
        held = diversify(file_of, np.arange(n), scores, top_k=10)
        decayed = saturated(file_of, scores)
        best = np.lexsort((np.arange(n), -decayed))[:10]
        assert [i for _, i in held] == best.tolist()
        assert np.allclose([s for s, _ in held], decayed[best])
