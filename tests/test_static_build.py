"""The shipped static model is what `python -m search_engine.embedding.static_build` makes from the
packaged MiniLM: a fresh distillation (real model2vec, real torch, offline) matches the shipped
tables, and searches with either rank alike.

On the machine that built the shipped files a rebuild is bit-identical (measured: max abs
difference 0.0). PCA and torch's CPU kernels may round differently on other BLAS builds or
thread counts, so the checks allow what such rounding can do and no more: a value may move by a
float16 step (max abs difference <= 0.01; a step is 0.0078 at the largest values, ~8.5), every
row keeps cosine > 0.999 to the shipped one, and the same queries return the same top hits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from search_engine.chunking.chunk import Chunk, content_hash
from search_engine.embedding.embedder import chunk_text
from search_engine.embedding.static_build import SHIPPED, build
from search_engine.embedding.static_model import load_static_model

pytestmark = [pytest.mark.minilm, pytest.mark.slow]


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("static-build") / "model"
    build(out)
    return out


def table(directory: Path) -> np.ndarray:
    tensors = load_file(directory / "model.safetensors")
    assert set(tensors) == {"embeddings"} and tensors["embeddings"].dtype == np.float16
    return tensors["embeddings"].astype(np.float32)


def test_a_fresh_distillation_matches_the_shipped_tables(rebuilt: Path) -> None:
    assert (rebuilt / "tokenizer.json").read_bytes() == (SHIPPED / "tokenizer.json").read_bytes()
    assert (rebuilt / "config.json").read_bytes() == (SHIPPED / "config.json").read_bytes()
    a, b = table(rebuilt), table(SHIPPED)
    assert a.shape == b.shape == (29525, 256)
    assert np.abs(a - b).max() <= 0.01
    cosines = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosines.min() > 0.999
    manifest, shipped_manifest = (json.loads((d / "manifest.json").read_text()) for d in (rebuilt, SHIPPED))
    assert {k: v for k, v in manifest.items() if k != "files"} == {
        k: v for k, v in shipped_manifest.items() if k != "files"
    }


def test_the_rebuilt_and_shipped_models_rank_alike(rebuilt: Path) -> None:
    corpus = {
        "net/retry.py": (
            "def retry(call, tries=5):\n    for attempt in range(tries):\n        time.sleep(0.1 * 2**attempt)"
        ),
        "web/cookies.py": "def parse_cookies(header):\n    return dict(p.split('=') for p in header.split(';'))",
        "db/pool.py": "class ConnectionPool:\n    def acquire(self):\n        return self._idle.pop()",
        "cli/args.py": "def parse_args(argv):\n    parser = argparse.ArgumentParser()",
        "io/csv_reader.py": "def read_rows(path):\n    with open(path) as f:\n        yield from csv.reader(f)",
    }
    chunks = [
        chunk_text(Chunk(p, "python", 1, 3, 0, len(t), t, "function", None, content_hash(t))) for p, t in corpus.items()
    ]
    queries = [
        "wait longer after each failure",
        "split a cookie header",
        "reuse database connections",
        "parse command line arguments",
        "iterate over csv lines",
    ]
    rankings = []
    for directory in (rebuilt, SHIPPED):
        model = load_static_model(directory)
        docs, asked = model.encode(chunks), model.encode(queries)
        rankings.append(np.argsort(-(asked @ docs.T), axis=1)[:, :3])
    np.testing.assert_array_equal(rankings[0], rankings[1])
    assert list(rankings[1][:, 0]) == [0, 1, 2, 3, 4]  # and each query finds its file
