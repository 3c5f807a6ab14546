"""What the index tests share: a small real repository, the real embedder counting what it is
asked to embed, and the chunks a tree should index to. Fixtures over them live in conftest.py."""

from __future__ import annotations

import re
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from search_engine.chunking.chunk import Chunk, content_hash
from search_engine.chunking.chunker import MAX_CHARS, chunk_file
from search_engine.config import DEFAULT_FRESH_WAIT_S, EngineConfig
from search_engine.embedding.embedder import LazyEmbedder
from search_engine.files.languages import language_for
from search_engine.index.manager import IndexManager

REPO = Path(__file__).resolve().parents[1]


class CountingEmbedder:
    """The real embedder, counting what it is asked to embed."""

    def __init__(self, inner: LazyEmbedder, model_id: str | None = None) -> None:
        self.inner = inner
        self.model_id = model_id or inner.model_id
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def load(self) -> object:
        return self.inner.load()

    def take(self) -> list[str]:
        texts, self.texts = self.texts, []
        return texts


def write_repo(root: Path) -> Path:
    files = {
        "app/client.py": '''\
            """HTTP client."""
            import socket


            class ClientSession:
                """Keeps connections alive between requests."""

                def close(self):
                    """Close every pooled connection."""
                    return None


            def retry_with_backoff(call, attempts=3):
                """Retry a failing call with exponential backoff."""
                for attempt in range(attempts):
                    try:
                        return call()
                    except OSError:
                        continue
            ''',
        "app/render.py": '''\
            def render_template(name, context):
                """Render an HTML template with the given context."""
                return name.format(**context)
            ''',
        "web/app.js": "export function startServer(port) {\n  return listen(port);\n}\n",
        "README.md": "# Demo\n\nA tiny project for the index tests.\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def expected_chunks(root: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        out += [(c.path, c.content) for c in chunk_file(rel, path.read_bytes(), language_for(rel))]
    return out


# Header slack: a short signature may join the first piece of its body past MAX_CHARS.
LIMIT = MAX_CHARS + 300


def assert_well_formed(data: bytes, chunks: list[Chunk]) -> None:
    """Spans are exact, sizes bounded, and every line with a word character is in a chunk."""
    lines = data.split(b"\n")
    covered: set[int] = set()
    for c in chunks:
        assert data[c.byte_start : c.byte_end].decode("utf-8", "replace") == c.content
        assert c.content_hash == content_hash(c.content)
        assert 1 <= c.line_start <= c.line_end <= len(lines)
        assert data[: c.byte_start].count(b"\n") + 1 == c.line_start
        assert data[: max(c.byte_start, c.byte_end - 1)].count(b"\n") + 1 == c.line_end
        assert c.byte_end - c.byte_start <= LIMIT
        covered.update(range(c.line_start, c.line_end + 1))
    for number, line in enumerate(lines, 1):
        if re.search(rb"\w", line):
            assert number in covered, f"line {number} is in no chunk: {line!r}"


def block_the_walk(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Make the next index updates' tree walk wait: (walking, release) events, the first set
    once a walk is waiting, the second to let it go on."""
    import search_engine.files.discovery as files
    import search_engine.index.update as indexing

    walking, release = threading.Event(), threading.Event()
    real_discover = files.discover

    def blocked_discover(*args: Any, **kwargs: Any) -> Any:
        walking.set()
        assert release.wait(60)
        return real_discover(*args, **kwargs)

    monkeypatch.setattr(indexing, "discover", blocked_discover)  # the name indexing calls
    return walking, release


def manager_for(
    cache: Path,
    embedder: CountingEmbedder,
    *,
    watch: bool = True,
    fresh_wait_s: float = DEFAULT_FRESH_WAIT_S,
) -> IndexManager:
    """An index manager caching in `cache` that embeds with `embedder`."""
    return IndexManager(EngineConfig(cache_dir=cache), embedder=embedder, watch=watch, fresh_wait_s=fresh_wait_s)
