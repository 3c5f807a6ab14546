"""`RankingRules`: which of the ranking's rules are on, one switch per rule.

Every rule is on in production, and nothing reads these switches but the ranking itself. They
exist so that each rule can be measured the way issue 39 asks: switched off alone, repository
by repository across the dev sets (`benchmarks/ablation.py`), a rule is kept only if it helps
more repositories than it hurts and hurts none by more than 0.02 NDCG@10. A rule that fails
that is deleted from the code, switch and all; a new rule gets a switch so it can be measured
the same way.

The engine reads one `RankingRules` from `EngineConfig.ranking` and hands it to the ranking
functions; each switch's docstring says what it turns off.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RankingRules:
    """One switch per ranking rule (see the module doc); all on by default."""

    # Path priors (`search_engine.priors`): each scales a kind of file down.
    test_files: bool = True
    """Tests (a `tests/` folder, `test_*.py`, `*_spec.rb`, `FooTest.java`) scaled 0.3."""
    shims: bool = True
    """Compatibility and vendored copies (`compat/`, `vendor/`, `third_party/`) scaled 0.3."""
    examples: bool = True
    """Examples, samples and demos scaled 0.3."""
    code_under_docs: bool = True
    """Code under a `docs/` folder scaled as an example, when the folder holds more pages
    (prose, HTML, CSS) than source files (`search_engine.ranking.priors.source_folders`)."""
    tooling: bool = True
    """Benchmarks and scripts (`bench/`, `scripts/`, `perf/`) scaled 0.3."""
    build_files: bool = True
    """Build scripts and manifests in code languages (`Rakefile`, `setup.py`, `*.config.ts`)
    scaled as tooling."""
    reexports: bool = True
    """Re-export files (`__init__.py`, `index.ts`, `mod.ts`, `package-info.java`) scaled 0.5."""
    prose: bool = True
    """Prose (Markdown, reST, text) scaled 0.3."""
    config: bool = True
    """Config files (JSON, YAML, TOML, ...) scaled 0.3."""
    data: bool = True
    """Data files scaled 0.3."""
    generated: bool = True
    """Generated files scaled 0.2."""
    templates: bool = True
    """Templates scaled 0.5."""
    implemented_headers: bool = True
    """A C/C++ header beside its own source file scaled 0.5, unless the header documents more
    of its declarations than that source (`search_engine.ranking.doc_comments`)."""
    platform_ports: bool = True
    """Platform ports (`src/win/`, `*_windows.go`, `aix.c`) scaled 0.7."""
    satellites: bool = True
    """Satellite packages beside a root package (sinatra's `rack-protection/`) scaled 0.5."""
    first_versions: bool = True
    """A kept `v1/` copy of the files one level up scaled as a shim."""
    query_lifts: bool = True
    """A query asking for a kind of file ("tests for", "README", "example") lifts its penalty."""
    codebase_words: bool = True
    """A word that names things in the codebase ("spec" in a spec validator, "test" in a test
    runner: most of its code uses the word) does not ask for tests."""
    # Hybrid fusion (`search_engine.hybrid`).
    symbol_definitions: bool = True
    """Chunks defining an identifier the query names are boosted."""
    sole_definitions: bool = True
    """A whole-query identifier defined in one file only keeps its score whatever the path
    priors say of that file (a test helper, a function just added to a test file)."""
    hybrid_semantic_blend: bool = True
    """Hybrid's semantic list is ranked by semantic mode's similarity (file blend, priors)
    rather than the raw cosine."""
    file_lexical: bool = True
    """BM25 over whole files, credited to each file's best chunk."""
    file_semantic: bool = True
    """The cosine with each file's mean vector, credited to its best chunk."""
    named_files: bool = True
    """A file the query names (`tokenizer.py`, `client/sesion`) is boosted."""
    path_words: bool = True
    """When no file is named, files whose stem or folder shares the query's words are boosted."""
    hybrid_coherence: bool = True
    """A file whose candidates match as a group gains (hybrid mode)."""
    # Semantic mode (`search_engine.semantic`).
    file_similarity: bool = True
    """A chunk's cosine is blended 0.3 with its file's (semantic mode)."""
    semantic_priors: bool = True
    """The path priors apply in semantic mode."""
    saturated_cut: bool = True
    """Semantic mode cuts its candidates by their score once decayed per file, not raw."""
    # Both modes (`search_engine.hits`).
    diversify: bool = True
    """Each further chunk of an already chosen file keeps half its score."""
    # Symbol matching (`search_engine.symbols`).
    symbol_spread: bool = True
    """An identifier inside a sentence that many files define is scaled by 3 / files."""
    qualified_tail: bool = True
    """A qualified query's last part alone (`Helpers` of `Sinatra::Helpers`) matches at 0.9."""
    fuzzy_symbols: bool = True
    """A bare identifier with no definition matches near-miss names (`TCPConector`)."""
    # Query terms (`search_engine.tokenize`).
    abbreviations: bool = True
    """A query word brings the abbreviation code uses for it ("callbacks" -> `cb`)."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every switch's name, in the order above."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def without(self, name: str) -> RankingRules:
        """These rules with `name` switched off (ValueError for a name that is no switch)."""
        if name not in self.names():
            raise ValueError(f"no ranking rule {name!r}; the rules are {', '.join(self.names())}")
        return dataclasses.replace(self, **{name: False})


ALL_ON = RankingRules()
"""The rules production ranks with."""
