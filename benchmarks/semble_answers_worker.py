"""semble's answers as its MCP `search` tool sends them, for `benchmarks/tokens.py`'s recall at
a token budget.

Runs inside semble's own virtualenv (started as a subprocess, like `semble_worker.py`), so it
imports nothing from codepager. For each labelled query it writes one JSON line: the repo, the
query, and for each result in rank order its path and the character offset at which that
result ends in the answer text, the text being exactly what semble's MCP tool returns by
default (`json.dumps(format_results(query, results, max_snippet_lines=10, ...))`).

usage: semble_answers_worker.py CORPORA_DIR ANNOTATIONS_DIR OUT_JSONL TOP_K
(the model comes from `SEMBLE_MODEL_NAME`, a model2vec directory).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

#: semble's MCP default: the first 10 lines of each chunk.
SNIPPET_LINES = 10


def main(corpora: Path, annotations: Path, out: Path, top_k: int) -> int:
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-cache-")
    from semble import SembleIndex
    from semble.utils import format_results

    with out.open("w") as sink:
        for ann in sorted(annotations.glob("*.json")):
            repo = ann.stem
            index = SembleIndex.from_path(corpora / repo)
            for item in json.loads(ann.read_text()):
                results = index.search(item["query"], top_k=top_k, max_snippet_lines=SNIPPET_LINES)
                answer = format_results(item["query"], results, SNIPPET_LINES, index.sources)
                # "query" then "results" open the answer (any "repos" follow them), so the
                # answer cut after result n is this prefix without its closing "]}".
                ends = [
                    [
                        r.chunk.file_path,
                        len(json.dumps({"query": answer["query"], "results": answer["results"][:n]})) - 2,
                    ]
                    for n, r in enumerate(results, 1)
                ]
                row = {"repo": repo, "query": item["query"], "ends": ends, "chars": len(json.dumps(answer))}
                sink.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])))
