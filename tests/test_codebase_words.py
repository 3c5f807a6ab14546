"""A query word that names things in the codebase asks for no kind of file (issue 39): "spec" in
a spec validator, "test" in a test runner, where the code itself uses the word widely."""

from __future__ import annotations

from pathlib import Path

import pytest

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.priors import PathPriors
from search_engine.ranking.rules import ALL_ON, RankingRules


def test_a_word_the_codebase_uses_does_not_ask_for_tests() -> None:
    query = "how the runner collects test files"
    assert "test" in PathPriors.for_query(query).lifted
    assert "test" in PathPriors.for_query(query, names_things=lambda word: False).lifted
    assert "test" not in PathPriors.for_query(query, names_things=lambda word: word == "test").lifted
    switched_off = RankingRules().without("codebase_words")
    assert "test" in PathPriors.for_query(query, rules=switched_off, names_things=lambda word: True).lifted


SPEC_VALIDATOR = {
    "validator/spec.py": (
        "class Spec:\n"
        '    """A loaded specification: its version and the rules a document must follow."""\n\n'
        "    def __init__(self, version, rules):\n"
        "        self.spec_version = version\n"
        "        self.rules = rules\n\n\n"
        "def load_spec(path):\n"
        "    return Spec(*read_spec_file(path))\n"
    ),
    "validator/conformance.py": (
        "def check_conformance(spec, document):\n"
        '    """Check a document against every rule of the spec; return the violations."""\n'
        "    return [rule for rule in spec.rules if not rule.holds(document)]\n"
    ),
    "validator/report.py": (
        "def report(spec, violations):\n"
        '    """Print each violation of the spec, with the spec version."""\n'
        "    for v in violations:\n"
        "        print(spec.spec_version, v)\n"
    ),
    "tests/test_conformance.py": (
        "from validator.conformance import check_conformance\n\n\n"
        "def test_a_conforming_document_passes_the_spec_check():\n"
        "    spec = make_spec()\n"
        "    assert check_conformance(spec, conforming_document()) == []\n\n\n"
        "def test_a_spec_violation_is_checked_and_reported():\n"
        "    spec = make_spec()\n"
        "    assert check_conformance(spec, broken_document())\n"
    ),
}


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("codebase-words") / "repo"
    for rel, text in SPEC_VALIDATOR.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("mode", [SearchMode.HYBRID, SearchMode.SEMANTIC])
def test_a_spec_validator_answers_a_spec_question_with_its_code(
    validator: Path, model_cache: Path, mode: SearchMode
) -> None:
    def ranked(rules: RankingRules) -> list[str]:
        engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False, ranking=rules))
        query = "spec check of a conforming document"
        return [m.path for m in engine.search(SearchRequest(mode=mode, query=query, root=str(validator))).matches]

    on, off = ranked(ALL_ON), ranked(RankingRules().without("codebase_words"))
    assert on[0].startswith("validator/")
    assert off.index("tests/test_conformance.py") < on.index("tests/test_conformance.py")
