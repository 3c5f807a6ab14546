"""Run the retrieval benchmark queries through semble, the peer we compare against.

This runs inside semble's own virtualenv (it must not share ours: different pins), started as
a subprocess by `benchmarks/retrieval.py`, so it imports nothing from codepager. It writes one
JSONL line per query in the format `/work/shared/bench/score.py` reads and prints one JSON
object of timings on stdout. A fresh `SEMBLE_CACHE_LOCATION` makes the index time cold.

usage: semble_worker.py CORPORA_DIR ANNOTATIONS_DIR OUT_JSONL
(the model comes from `SEMBLE_MODEL_NAME`, a model2vec directory).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 5  # each query is timed this many times after the first (warm) run


def main(corpora: Path, annotations: Path, out: Path) -> int:
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-cache-")
    from semble import SembleIndex

    index_s: dict[str, float] = {}
    latencies: list[float] = []
    with out.open("w") as sink:
        for ann in sorted(annotations.glob("*.json")):
            repo = ann.stem
            t0 = time.perf_counter()
            index = SembleIndex.from_path(corpora / repo)
            index_s[repo] = time.perf_counter() - t0
            for item in json.loads(ann.read_text()):
                results = index.search(item["query"], top_k=10)
                for _ in range(REPEATS):
                    t0 = time.perf_counter()
                    index.search(item["query"], top_k=10)
                    latencies.append((time.perf_counter() - t0) * 1000)
                row = {
                    "repo": repo,
                    "query": item["query"],
                    "results": [{"path": r.chunk.file_path} for r in results],
                }
                sink.write(json.dumps(row) + "\n")
    print(
        json.dumps(
            {
                "index_s": index_s,
                "index_total_s": sum(index_s.values()),
                "query_p50_ms": statistics.median(latencies),
                "query_p95_ms": statistics.quantiles(latencies, n=20)[-1],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
