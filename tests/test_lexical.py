"""BM25 over real chunks (from the real chunker): identifier and path matching, file-level
scores, persistence round trips and refusal of foreign or damaged indexes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from search_engine.chunking.chunk import Chunk
from search_engine.chunking.chunker import chunk_file
from search_engine.errors import IndexStoreError
from search_engine.files.languages import language_for
from search_engine.ranking.code_tokens import query_terms
from search_engine.ranking.lexical import LexicalIndex

SOURCES = {
    "net/client.py": '''
class ClientSession:
    """An HTTP client session that keeps connections alive."""

    def close(self):
        self._connector.release_all()
''',
    "net/multipart.py": """
def write_part(writer, boundary):
    writer.write(boundary)
""",
    "util/strings.py": """
def to_snake_case(name):
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def client_session_banner():
    return "session"
""",
}


def _chunks() -> list[Chunk]:
    chunks: list[Chunk] = []
    for path, text in SOURCES.items():
        chunks.extend(chunk_file(path, text.lstrip().encode(), language_for(path)))
    return chunks


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    return _chunks()


@pytest.fixture(scope="module")
def index(chunks: list[Chunk]) -> LexicalIndex:
    return LexicalIndex.build(chunks)


def _best(index: LexicalIndex, chunks: list[Chunk], query: str) -> Chunk:
    scores = index.scores(query_terms(query))
    assert scores.shape == (len(chunks),) and scores.max() > 0
    return chunks[int(np.argmax(scores))]


@pytest.mark.parametrize("query", ["ClientSession", "client_session", "clientSession"])
def test_identifier_in_any_convention_finds_the_class(index: LexicalIndex, chunks: list[Chunk], query: str) -> None:
    assert _best(index, chunks, query).path == "net/client.py"


def test_path_words_count_when_the_body_never_says_them(index: LexicalIndex, chunks: list[Chunk]) -> None:
    assert "multipart" not in "".join(c.content for c in chunks if c.path == "net/multipart.py")
    assert _best(index, chunks, "multipart handling").path == "net/multipart.py"


def test_unknown_terms_score_zero_everywhere(index: LexicalIndex) -> None:
    scores = index.scores(query_terms("zeppelin quaternion"))
    assert scores.shape == (index.size,) and not scores.any()


def test_file_scores_are_aligned_with_files(index: LexicalIndex) -> None:
    assert index.files == list(SOURCES)
    scores = index.file_scores(query_terms("snake case"))
    assert index.files[int(np.argmax(scores))] == "util/strings.py"


def test_save_and_load_give_identical_scores(index: LexicalIndex, tmp_path: Path) -> None:
    index.save(tmp_path / "lexical")
    loaded = LexicalIndex.load(tmp_path / "lexical")
    terms = query_terms("client session connections")
    assert loaded.files == index.files and loaded.size == index.size
    np.testing.assert_array_equal(loaded.scores(terms), index.scores(terms))
    np.testing.assert_array_equal(loaded.file_scores(terms), index.file_scores(terms))


def test_empty_corpus_builds_saves_and_scores_nothing(tmp_path: Path) -> None:
    empty = LexicalIndex.build([])
    empty.save(tmp_path / "empty")
    loaded = LexicalIndex.load(tmp_path / "empty")
    assert loaded.size == 0 and loaded.files == []
    assert loaded.scores(["anything"]).shape == (0,)


def test_index_from_another_version_is_refused(index: LexicalIndex, tmp_path: Path) -> None:
    index.save(tmp_path / "lexical")
    meta = tmp_path / "lexical" / "lexical.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "version": -1}))
    with pytest.raises(IndexStoreError, match="rebuild"):
        LexicalIndex.load(tmp_path / "lexical")


def test_missing_or_damaged_index_is_refused(index: LexicalIndex, tmp_path: Path) -> None:
    with pytest.raises(IndexStoreError, match="cannot read"):
        LexicalIndex.load(tmp_path / "nowhere")
    index.save(tmp_path / "lexical")
    (tmp_path / "lexical" / "lexical.json").write_text("{not json")
    with pytest.raises(IndexStoreError, match="cannot read"):
        LexicalIndex.load(tmp_path / "lexical")
