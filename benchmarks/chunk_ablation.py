"""How chunk size and the weight of a chunk's name in its embedding text move retrieval.

Semantic-only retrieval (cosine between the query and each chunk vector, the static model,
files ranked by their best chunk) over the shared kit's 81 queries, scored by the kit's own
`score.py` (file-level NDCG@10). Only the two indexing-side knobs vary:
`search_engine.chunking.chunker.MAX_CHARS` and `search_engine.embedding.embedder.NAME_WEIGHT` (how many times
path and symbol precede the content in `chunk_text`; 0 embeds the bare content). Ranking is
deliberately the plainest possible, so the numbers isolate what chunking and chunk text do;
hybrid ranking (`benchmarks/retrieval.py`) builds on top of the chosen values.

usage: python benchmarks/chunk_ablation.py [--corpora DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # benchmarks/regex.py would shadow the `regex` package

import numpy as np

import search_engine.chunking.chunker as chunking
import search_engine.embedding.embedder as embeddings
from search_engine.chunking.jobs import ChunkJob, chunk_files
from search_engine.config import EngineConfig
from search_engine.files.discovery import discover
from search_engine.files.paths import SearchLocation

BENCH = Path("/work/shared/bench")
REPOS = ("aiohttp", "fastapi", "model2vec", "pydantic")
DEFAULT_CORPORA = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codepager-bench"
# (MAX_CHARS, NAME_WEIGHT): the shipped values against one-knob-at-a-time alternatives
VARIANTS = [(1000, 2), (1000, 0), (1000, 1), (1000, 4), (600, 2), (1500, 2), (2500, 2)]


def chunks_of(root: Path) -> list[Any]:
    config = EngineConfig()
    files = discover(SearchLocation(root.resolve(), None), (), (), config).files
    results = chunk_files([ChunkJob(f, None) for f in files], config.max_file_size, lambda done, total: None)
    return [c for r in results if r is not None for c in (r.chunks or ())]


def ndcg(rows: list[dict[str, Any]]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, str(BENCH / "score.py"), fh.name], check=True, capture_output=True, text=True
    ).stdout
    os.unlink(fh.name)
    return {
        p[0]: float(p[-1].split("=")[1])
        for p in (line.split() for line in out.splitlines())
        if p and p[-1].startswith("ndcg@")
    }


def run(variant: tuple[int, int], corpora: Path, embedder: embeddings.LazyEmbedder) -> dict[str, float]:
    chunking.MAX_CHARS, embeddings.NAME_WEIGHT = variant
    rows = []
    for repo in REPOS:
        chunks = chunks_of(corpora / repo)
        vectors = embedder.embed([embeddings.chunk_text(c) for c in chunks])
        for item in json.loads((BENCH / "annotations" / f"{repo}.json").read_text()):
            order = np.argsort(-(vectors @ embedder.embed([item["query"]])[0]), kind="stable")
            files: list[str] = []
            for i in order:
                if chunks[i].path not in files:
                    files.append(chunks[i].path)
                if len(files) == 10:
                    break
            rows.append({"repo": repo, "query": item["query"], "results": [{"path": p} for p in files]})
    return ndcg(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA)
    args = ap.parse_args()
    embedder = embeddings.embedder_for(EngineConfig())
    shipped = (chunking.MAX_CHARS, embeddings.NAME_WEIGHT)
    print("| MAX_CHARS | NAME_WEIGHT | symbol | semantic | architecture | all |")
    print("|---|---|---|---|---|---|")
    for variant in VARIANTS:
        scores = run(variant, args.corpora, embedder)
        mark = " (shipped)" if variant == shipped else ""
        cells = " | ".join(f"{scores.get(c, 0.0):.3f}" for c in ("symbol", "semantic", "architecture", "all"))
        print(f"| {variant[0]} | {variant[1]}{mark} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
