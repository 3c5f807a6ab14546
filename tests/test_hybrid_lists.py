"""Hybrid search's semantic list ranks chunks as semantic mode does (real chunker, the real
shipped static model, real persistent index): a test or a doc page that paraphrases the query
more closely than the implementation does not take the list's first place from it."""

from __future__ import annotations

from pathlib import Path

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest

FILES = {
    "net/retry.py": "def retry_with_backoff(func, attempts=5, base_delay=0.1):\n"
    '    """Call func again after transient failures, sleeping exponentially longer each time."""\n'
    "    for attempt in range(attempts):\n"
    "        try:\n"
    "            return func()\n"
    "        except ConnectionError:\n"
    "            time.sleep(base_delay * 2 ** attempt)\n"
    "    return func()\n",
    "tests/test_retry.py": "def test_retry_waits_longer_after_each_failure():\n"
    '    """Retry failed calls, waiting exponentially longer after each failure."""\n'
    '    assert retry_with_backoff(flaky, attempts=3) == "ok"\n',
    "docs/retries.md": "# Retries\n\nFailed calls are retried, waiting exponentially longer after each failure.\n",
    "net/pool.py": 'def acquire(pool):\n    """Take a connection from the pool."""\n    return pool.get()\n',
}
QUERY = "retry failed calls waiting exponentially longer after each failure"


def test_the_semantic_list_puts_the_implementation_above_a_closer_test(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    engine = SearchEngine(EngineConfig(cache_dir=model_cache))
    request = SearchRequest(mode=SearchMode.HYBRID, query=QUERY, root=str(root.resolve()), top_k=4)
    ranks = {m.path: m.ranks or {} for m in engine.search(request).matches}
    # By raw cosine the test's docstring is the closest chunk; its path prior puts it second.
    assert ranks["net/retry.py"]["semantic"] == 1
    assert ranks["tests/test_retry.py"]["semantic"] > 1 and ranks["docs/retries.md"]["semantic"] > 1
    index = engine.indexes.get(root.resolve())
    query_vector = index.embed_query(QUERY)
    rows = index.vectors.rows(slice(0, len(index.chunks)))
    cosines = {chunk.path: float(rows[i] @ query_vector) for i, chunk in enumerate(index.chunks)}
    assert cosines["tests/test_retry.py"] > cosines["net/retry.py"]
