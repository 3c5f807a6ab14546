"""Run the retrieval benchmark queries through semble, the peer we compare against.

This runs inside semble's own virtualenv (it must not share ours: different pins), started as
a subprocess by `benchmarks/retrieval.py`, so it imports nothing from codepager. It writes one
JSONL line per query in the format `/work/shared/bench/score.py` reads and prints one JSON
object of timings on stdout. A fresh `SEMBLE_CACHE_LOCATION` makes the index time cold;
the model is loaded before timing, as codepager's benchmark does for its own.

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

    with tempfile.TemporaryDirectory() as warm:  # load the model outside the timed part
        (Path(warm) / "warm.py").write_text("def warm_up():\n    return 1\n")
        SembleIndex.from_path(warm)
    index_s: dict[str, float] = {}
    latencies: list[float] = []
    cpu: list[float] = []
    chunks = 0
    with out.open("w") as sink:
        for ann in sorted(annotations.glob("*.json")):
            repo = ann.stem
            t0 = time.perf_counter()
            index = SembleIndex.from_path(corpora / repo)
            index_s[repo] = time.perf_counter() - t0
            chunks += len(index.chunks)
            for item in json.loads(ann.read_text()):
                results = index.search(item["query"], top_k=10)
                for _ in range(REPEATS):
                    t0, c0 = time.perf_counter(), time.process_time()
                    index.search(item["query"], top_k=10)
                    latencies.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
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
                "query_cpu_p50_ms": statistics.median(cpu),
                "chunks": chunks,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
