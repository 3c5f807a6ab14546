"""Embeddings: the real models, offline, in both profiles; the static model shipped in the
package (nothing built at run time); the model2vec format read as model2vec reads it; clear
errors for models that are not there or not installed; nothing downloaded."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import numpy as np
import pytest

from search_engine.chunking.chunk import Chunk, content_hash
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import (
    NAME_WEIGHT,
    STATIC_MODEL_DIR,
    LazyEmbedder,
    chunk_text,
    embedder_for,
    resolve_model,
)
from search_engine.embedding.static_model import load_static_model
from search_engine.errors import ModelLoadError


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test: models must never be downloaded."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_static_profile_is_the_model_shipped_in_the_package(tmp_path: Path) -> None:
    """The default profile reads `search_engine/embedding/model/`: no cache, no distillation. Its id
    names the tables' digests as the build's manifest records them, and those are the files'
    real digests, so a rebuilt model gets a new id (and its indexes rebuild)."""
    spec = resolve_model(EngineConfig(cache_dir=tmp_path))
    assert spec.kind == "static" and Path(spec.source) == STATIC_MODEL_DIR
    manifest = json.loads((STATIC_MODEL_DIR / "manifest.json").read_text())
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((STATIC_MODEL_DIR / name).read_bytes()).hexdigest() == digest, name
    assert set(manifest["files"]) == {"model.safetensors", "tokenizer.json", "config.json"}
    files_digest = hashlib.sha256(json.dumps(manifest["files"], sort_keys=True).encode()).hexdigest()
    assert spec.model_id == f"static-minilm-{files_digest[:16]}/t1"
    size = sum(p.stat().st_size for p in STATIC_MODEL_DIR.iterdir())
    assert size < 17 * 1024 * 1024  # 29,525 float16 rows of 256 and the tokenizer
    assert not any(tmp_path.iterdir())  # nothing written to the cache dir


def test_static_vectors_are_normalized_and_mean_something(static_embedder: LazyEmbedder, no_network: None) -> None:
    texts = [
        "def retry(fn): retry the call with exponential backoff after a failure",
        "retry failed requests with backoff",
        "render the html template with jinja",
        "",
    ]
    vectors = static_embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 256)
    np.testing.assert_allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, rtol=1e-5)
    assert not vectors[3].any()  # no tokens, no direction
    sims = vectors[:3] @ vectors[1]
    assert sims[0] > sims[2] + 0.1
    np.testing.assert_array_equal(static_embedder.embed(texts[:2]), vectors[:2])  # deterministic


def test_fast_pooling_matches_model2vec(static_embedder: LazyEmbedder) -> None:
    """The pooling is model2vec's mean of token vectors, computed per distinct word; model2vec
    itself reads the shipped directory. (model2vec averages in the table's float16, ours in
    float32: hence cosines within 1e-4, not closer.)"""
    from model2vec import StaticModel

    reference = StaticModel.from_pretrained(Path(static_embedder.spec.source), normalize=True)
    texts = [
        "class ClientSession:\n    def close(self) -> None:\n        self._connector.close()",
        "naïve café — 日本語 text, with_under_scores and CamelCaseWords!",
        "x = {'a': [1, 2, 3]}  # comment",
        Path(__file__).read_text(encoding="utf-8")[:400],
        "SELECT * FROM users WHERE id = $1;",
        "    indented\tand\ttabbed\r\nlines",
        "",  # no tokens: zeros, like model2vec
    ]
    theirs = reference.encode(texts)
    batched = static_embedder.embed(texts)  # many texts: the word tables
    one_by_one = np.vstack([static_embedder.embed([t]) for t in texts])  # a query: direct
    assert not theirs[-1].any() and not batched[-1].any() and not one_by_one[-1].any()
    theirs = theirs[:-1] / np.linalg.norm(theirs[:-1], axis=1, keepdims=True)
    np.testing.assert_allclose((batched[:-1] * theirs).sum(axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose((one_by_one[:-1] * theirs).sum(axis=1), 1.0, atol=1e-4)


def test_pooling_is_exact_for_any_batch_and_repeated_words(static_embedder: LazyEmbedder) -> None:
    """Texts of every piece count, some far longer than one gather block, repeated words and
    pieces: the grouped sums equal the direct per-text sums (up to float32 rounding, which
    the 5,000-word text's different summation order takes to ~7e-6)."""
    words = ["retry", "back_off", "self.pool", "x", "(a,b)", "HTTPClient", "naïve", "日本"]
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(words, size=n)) for n in (1, 2, 2, 3, 40, 40, 700, 5000, 9)]
    batched = static_embedder.embed(texts)
    direct = np.vstack([static_embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, direct, atol=2e-5)


def test_model2vec_weights_and_mapping_are_applied_as_model2vec_does(tmp_path: Path) -> None:
    """A model2vec directory with per-token weights and a token mapping (vocabulary
    quantization) runs on the static path with model2vec's results."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(STATIC_MODEL_DIR / "tokenizer.json"))
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(3)
    clusters = rng.standard_normal((64, 16)).astype(np.float32)
    mapping = rng.integers(0, 64, size=vocab)
    weights = rng.uniform(0.1, 2.0, size=vocab)
    StaticModel(
        vectors=clusters, tokenizer=tokenizer, weights=weights, token_mapping=mapping, normalize=True
    ).save_pretrained(tmp_path / "m2v")
    texts = ["def parse_cookies(header): return dict(pairs)", "retry with backoff", "a b c d e f", "x"]
    ours = load_static_model(tmp_path / "m2v").encode(texts)
    theirs = StaticModel.from_pretrained(tmp_path / "m2v", normalize=True).encode(texts)
    np.testing.assert_allclose(ours, theirs / np.linalg.norm(theirs, axis=1, keepdims=True), atol=1e-5)


def test_a_table_that_does_not_fit_the_vocabulary_is_refused(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    (tmp_path / "tokenizer.json").write_bytes((STATIC_MODEL_DIR / "tokenizer.json").read_bytes())
    save_file({"embeddings": np.zeros((10, 8), np.float32)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="10 table rows for a vocabulary of"):
        load_static_model(tmp_path)
    save_file({"vectors": np.zeros((10, 8), np.float32)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="not a model2vec table"):
        load_static_model(tmp_path)


def test_embedder_construction_loads_nothing(tmp_path: Path) -> None:
    """A server builds its engine at start-up: that must not load a model."""
    embedder = embedder_for(EngineConfig(cache_dir=tmp_path))
    assert embedder.model_id.startswith("static-minilm-")
    assert embedder._loaded is None and not any(tmp_path.iterdir())


def test_missing_local_model_path_is_a_clear_error_without_download(tmp_path: Path, no_network: None) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="does not exist") as err:
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model=str(missing)))
    assert "never downloaded" in str(err.value)
    with pytest.raises(ModelLoadError, match="does not exist"):
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model="./relative/missing"))


def test_unknown_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"unknown embedding profile 'fast'.*static, minilm"):
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_profile="fast"))


def test_a_local_model2vec_directory_can_be_configured(model_cache: Path, static_embedder: LazyEmbedder) -> None:
    configured = embedder_for(EngineConfig(cache_dir=model_cache, embedding_model=static_embedder.spec.source))
    assert configured.spec.kind == "static"
    assert configured.model_id.startswith("path:")
    text = ["open a websocket connection"]
    np.testing.assert_allclose(configured.embed(text), static_embedder.embed(text), atol=1e-6)


@pytest.mark.minilm
def test_minilm_profile_runs_the_packaged_transformer_offline(tmp_path: Path, no_network: None) -> None:
    embedder = embedder_for(EngineConfig(cache_dir=tmp_path, embedding_profile="minilm"))
    assert embedder.spec.kind == "transformer"
    vectors = embedder.embed(["retry with backoff", "exponential backoff between retries", "parse a csv file"])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    # a model name that is not in the local cache fails offline, with what to do instead
    unknown = embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model="no-such-org/no-such-model"))
    with pytest.raises(ModelLoadError, match=r"offline.*nothing is downloaded"):
        unknown.embed(["x"])


def test_chunk_text_weights_the_name_and_path() -> None:
    chunk = Chunk(
        "aiohttp/client_ws.py",
        "python",
        1,
        2,
        0,
        10,
        "body text",
        "method",
        "ClientWebSocketResponse.receive",
        content_hash("body text"),
    )
    text = chunk_text(chunk)
    assert text.endswith("body text")
    assert text.count("aiohttp client ws Client Web Socket Response receive") == NAME_WEIGHT
    assert text.count("aiohttp/client_ws.py ClientWebSocketResponse.receive") == NAME_WEIGHT
