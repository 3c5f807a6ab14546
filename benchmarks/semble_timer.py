"""Times semble's warm searches on request, for `benchmarks/warm.py`'s side-by-side p50.

Runs inside semble's own virtualenv (started as a subprocess, like `semble_worker.py`), so it
imports nothing from codepager. It keeps running, reading one JSON request a line on stdin and
answering one JSON line on stdout, so the caller can interleave each query's timed runs with
codepager's (load on the machine then hits both alike):

    {"op": "index", "root": DIR}                 -> {"chunks": N, "seconds": S}
    {"op": "search", "root": DIR, "query": Q, "repeats": R, "top_k": K}
                                  -> {"ms": [R wall times], "cpu_ms": [R CPU times], "paths": [...]}

Each search runs once untimed (warm), then `repeats` times timed, in wall time and in this
process's CPU time (every thread's: semble's numpy may run its products on several). The model
is loaded before the first index, outside any timing.

usage: semble_timer.py   (the model comes from `SEMBLE_MODEL_NAME`, a model2vec directory)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> int:
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-timer-")
    from semble import SembleIndex

    with tempfile.TemporaryDirectory() as warm:  # load the model outside the timed part
        (Path(warm) / "warm.py").write_text("def warm_up():\n    return 1\n")
        SembleIndex.from_path(warm)
    indexes: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        root = request["root"]
        if request["op"] == "index":
            started = time.perf_counter()
            indexes[root] = SembleIndex.from_path(Path(root))
            answer: dict[str, Any] = {"chunks": len(indexes[root].chunks), "seconds": time.perf_counter() - started}
        else:
            index, query, top_k = indexes[root], request["query"], request["top_k"]
            results = index.search(query, top_k=top_k)
            times, cpu = [], []
            for _ in range(request["repeats"]):
                started, cpu_started = time.perf_counter(), time.process_time()
                index.search(query, top_k=top_k)
                times.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - cpu_started) * 1000)
            answer = {"ms": times, "cpu_ms": cpu, "paths": [r.chunk.file_path for r in results]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
