"""`RankingRules`: each ranking rule can be switched off alone, and the switch reaches the ranking
(what `benchmarks/ablation.py` relies on to measure each rule repository by repository)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.priors import PathPriors
from search_engine.ranking.rules import ALL_ON, RankingRules


@pytest.mark.parametrize("name", RankingRules.names())
def test_each_rule_is_on_by_default_and_switches_off_alone(name: str) -> None:
    off = RankingRules().without(name)
    changed = [f.name for f in dataclasses.fields(off) if getattr(off, f.name) != getattr(ALL_ON, f.name)]
    assert changed == [name]
    assert getattr(off, name) is False


def test_an_unknown_rule_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no ranking rule 'tests'.*test_files"):
        RankingRules().without("tests")


@pytest.mark.parametrize(
    ("rule", "path", "language"),
    [
        ("test_files", "tests/test_pool.py", "python"),
        ("code_under_docs", "docs/code/echo/main.c", "c"),
        ("build_files", "Rakefile", "ruby"),
        ("prose", "guide/pooling.md", None),
    ],
)
def test_a_prior_switched_off_lifts_its_own_penalty_only(rule: str, path: str, language: str | None) -> None:
    on = PathPriors.for_query("connection pooling")
    off = PathPriors.for_query("connection pooling", rules=RankingRules().without(rule))
    assert on.factor(path, language) < 1.0
    assert off.factor(path, language) == 1.0
    # The same kind found by other evidence keeps its penalty: an example folder, a scripts folder.
    assert off.factor("examples/echo/main.c", "c") == on.factor("examples/echo/main.c", "c") < 1.0
    assert off.factor("scripts/build.rb", "ruby") == on.factor("scripts/build.rb", "ruby") < 1.0


def test_query_lifts_switched_off_keep_the_penalty_a_query_asks_to_lift() -> None:
    asked = "tests for the connection pool"
    assert PathPriors.for_query(asked).factor("tests/test_pool.py", "python") == 1.0
    kept = PathPriors.for_query(asked, rules=RankingRules().without("query_lifts"))
    assert kept.factor("tests/test_pool.py", "python") < 1.0


REPO = {
    "net/session.py": (
        "class ClientSession:\n"
        '    """Sends HTTP requests and keeps their connections alive for reuse."""\n\n'
        "    def close(self):\n"
        "        self.closed = True\n"
    ),
    "tests/test_session.py": (
        "from net.session import ClientSession\n\n\n"
        "def test_close_marks_the_client_session_closed():\n"
        "    session = ClientSession()\n"
        "    session.close()\n"
        "    assert session.closed\n"
    ),
}


def test_the_engine_ranks_with_the_rules_of_its_config(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "repo"
    for rel, text in REPO.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def ranked(rules: RankingRules) -> list[tuple[str, float | None]]:
        engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False, ranking=rules))
        result = engine.search(SearchRequest(mode=SearchMode.HYBRID, query="closing a client session", root=str(root)))
        return [(m.path, m.score) for m in result.matches]

    def test_score(ranking: list[tuple[str, float | None]]) -> float:
        score = next(s for p, s in ranking if p == "tests/test_session.py")
        assert score is not None
        return score

    on, off = ranked(ALL_ON), ranked(RankingRules().without("test_files"))
    assert on[0][0] == "net/session.py"
    assert test_score(off) > test_score(on)


RETRY_REPO = {
    "net/retry.py": (
        "def backoff_delay(attempt):\n"
        '    """How long to wait before retry number `attempt`: exponential backoff."""\n'
        "    return 2 ** attempt\n\n\n"
        "def retry(call, attempts=3):\n"
        '    """Call again after a failure, waiting with backoff between retries."""\n'
        "    for attempt in range(attempts):\n"
        "        try:\n            return call()\n"
        "        except OSError:\n            sleep(backoff_delay(attempt))\n\n\n"
        "def should_retry(error):\n"
        '    """Whether a failed call is worth a retry: timeouts and resets are."""\n'
        "    return isinstance(error, (TimeoutError, ConnectionResetError))\n"
    ),
    "net/client.py": (
        "def fetch(url):\n"
        '    """Fetch `url` once; the caller decides about retries."""\n'
        "    return open_url(url).read()\n"
    ),
}


def test_hybrid_coherence_credits_a_file_whose_chunks_match_together(tmp_path: Path, model_cache: Path) -> None:
    """A module with several chunks about the question gains `coherence` (its rank shows in the
    match's ranks); with the rule off, no match names it."""
    root = tmp_path / "repo"
    for rel, text in RETRY_REPO.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def ranked(rules: RankingRules) -> list[tuple[str, dict[str, int]]]:
        engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False, ranking=rules))
        request = SearchRequest(mode=SearchMode.HYBRID, query="retry failed calls with backoff", root=str(root))
        return [(m.path, m.ranks or {}) for m in engine.search(request).matches]

    on = ranked(ALL_ON)
    assert on[0][0] == "net/retry.py" and on[0][1].get("coherence") == 1
    assert all("coherence" not in ranks for _, ranks in ranked(RankingRules().without("hybrid_coherence")))


SOLE_REPO = {
    **{
        f"pool/pool_{n}.py": (
            f"def make_pool_{n}(size):\n"
            f'    """Make a pool of {n} workers; a fake pool in tests stands in for it."""\n'
            "    return [make_worker() for _ in range(size)]\n\n\n"
            f"class Pool{n}:\n"
            '    """A pool: make, grow and shrink it."""\n'
        )
        for n in range(6)
    },
    "pool/config.py": "class PoolConfig:\n    size = 4\n",
    "tests/test_pool.py": (
        "class PoolConfig:\n    size = 1\n\n\n"
        "def make_fake_pool():\n"
        '    """A pool with no workers, for the tests."""\n'
        "    return []\n"
    ),
}


def test_a_name_defined_in_one_file_only_is_found_there_whatever_its_path(tmp_path: Path, model_cache: Path) -> None:
    """`make_fake_pool` is defined in a test file only: searched by its name, that definition is
    the answer (the freshness benchmark's new functions in test files went missing without
    this, below chunks that merely share the name's words). `PoolConfig`, defined in the code
    and again in a test, is still ranked by the path priors: the code's first."""
    root = tmp_path / "repo"
    for rel, text in SOLE_REPO.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def first(query: str, rules: RankingRules) -> str:
        engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False, ranking=rules))
        return engine.search(SearchRequest(mode=SearchMode.HYBRID, query=query, root=str(root))).matches[0].path

    assert first("make_fake_pool", ALL_ON) == "tests/test_pool.py"
    assert first("make_fake_pool", RankingRules().without("sole_definitions")) != "tests/test_pool.py"
    assert first("PoolConfig", ALL_ON) == "pool/config.py"
