"""What each ranking rule is worth, repository by repository: every rule switched off in turn.

Issue 39's standard for a ranking rule (a path prior, a signal, a weight's special case): it is
kept only if, measured per dev repository, it helps more repositories than it hurts and hurts
none by more than 0.02 NDCG@10. Fitting the dev sets' 286 queries as a whole can keep a rule
that wins big on one repository and quietly costs several others; counting repositories asks
whether the rule holds on code it was not tuned on, one repository standing in for unseen code.

The rules are the fields of `RankingRules` (all on in production). For each rule, or those
`--rules` names, this runs every query of the chosen sets (default: all three dev sets, 15
repositories) through `SearchEngine.search` in hybrid and semantic mode with that rule off and
everything else on, on the kept static-profile indexes (built if missing), and reports each
repository's NDCG@10 with the rule on minus with it off (positive: the rule helps there).

A rule is judged in each mode it changes anything in; it passes a mode when it helps more
repositories than it hurts (by more than `NOISE`) and hurts none by more than `MAX_HURT`, and
`keep` means it passes every mode it changes. A rule that changes no query of any set has no
evidence for it: `no effect`.

Scores come from the kit's own scorer (`score.py`'s `ndcg_at_k`, loaded from the kit, per
query, averaged per repository as `score.py` averages).

usage: python benchmarks/ablation.py [--rules RULE,...] [--sets python,multilang,multilang2]
       [--corpora DIR] [--multilang-corpora DIR] [--multilang2-corpora DIR] [--cache DIR]
       [--report-json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parents[1])  # benchmarks/regex.py would shadow `regex` (see retrieval.py)

from benchmarks.report import Report, add_report_argument
from benchmarks.retrieval import (
    BENCH,
    STATIC_PROFILE_CACHE,
    TOP_K,
    BenchSet,
    add_corpora_arguments,
    bench_sets,
    load_queries,
    main_over_sets,
)
from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.rules import RankingRules

MODES = ("hybrid", "semantic")
# A repository's NDCG@10 moving by less than this is a tie (float noise of a reordered sum).
NOISE = 0.0005
# The most a kept rule may cost any one repository.
MAX_HURT = 0.02

# (repo, query) -> NDCG@10, per mode.
Scores = dict[str, dict[tuple[str, str], float]]


def kit_scorer() -> tuple[Callable[[list[str], list[str], int], float], Callable[[dict[str, Any]], list[str]]]:
    """The kit's `ndcg_at_k` and its reading of an annotation's targets, from `score.py`."""
    spec = importlib.util.spec_from_file_location("bench_score", BENCH / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ndcg_at_k, module._targets


def measure(rules: RankingRules, sets: list[BenchSet], cache: Path) -> Scores:
    """Every query's NDCG@10 in each mode under `rules`, on the indexes kept in `cache`."""
    ndcg_at_k, targets = kit_scorer()
    engine = SearchEngine(EngineConfig(cache_dir=cache, embedding_profile="static", watch=False, ranking=rules))
    scores: Scores = {mode: {} for mode in MODES}
    for bench in sets:
        for repo, item in load_queries(bench):
            root = str((bench.corpora / repo).resolve())
            for mode in MODES:
                result = engine.search(
                    SearchRequest(mode=SearchMode(mode), query=item["query"], root=root, top_k=TOP_K)
                )
                paths = [m.path for m in result.matches]
                scores[mode][repo, item["query"]] = ndcg_at_k(paths, targets(item), TOP_K)
    return scores


def switched_off(spec: str) -> RankingRules:
    """All rules on but those `spec` names (`a+b`: both at once, to see how removals add up)."""
    rules = RankingRules()
    for name in spec.split("+"):
        rules = rules.without(name)
    return rules


def per_repo(scores: dict[tuple[str, str], float]) -> dict[str, float]:
    """Mean NDCG@10 of each repository's queries."""
    by_repo: dict[str, list[float]] = {}
    for (repo, _), value in scores.items():
        by_repo.setdefault(repo, []).append(value)
    return {repo: statistics.fmean(values) for repo, values in by_repo.items()}


@dataclasses.dataclass
class Verdict:
    """One rule in one mode: per-repository deltas (on minus off) and what they say."""

    deltas: dict[str, float]
    moved: int  # queries whose NDCG@10 changed

    @property
    def helps(self) -> int:
        return sum(d > NOISE for d in self.deltas.values())

    @property
    def hurts(self) -> int:
        return sum(d < -NOISE for d in self.deltas.values())

    @property
    def worst(self) -> float:
        return min(self.deltas.values())

    @property
    def passes(self) -> bool:
        return self.helps > self.hurts and self.worst >= -MAX_HURT


def verdicts(base: Scores, off: Scores) -> dict[str, Verdict]:
    out = {}
    for mode in MODES:
        on_repo, off_repo = per_repo(base[mode]), per_repo(off[mode])
        moved = sum(abs(base[mode][k] - off[mode][k]) > 1e-9 for k in base[mode])
        out[mode] = Verdict({r: on_repo[r] - off_repo[r] for r in on_repo}, moved)
    return out


def decision(by_mode: dict[str, Verdict]) -> str:
    judged = [v for v in by_mode.values() if v.moved]
    if not judged:
        return "no effect"
    return "keep" if all(v.passes for v in judged) else "remove"


def tables(results: dict[str, dict[str, Verdict]], repos: list[str]) -> str:
    lines: list[str] = []
    for mode in MODES:
        lines += [
            f"**{mode}**: NDCG@10 with the rule on minus off, per repository",
            "",
            "| rule | " + " | ".join(repos) + " | helps | hurts | worst | verdict |",
            "|---|" + "---|" * (len(repos) + 4),
        ]
        for rule, by_mode in results.items():
            v = by_mode[mode]
            cells = " | ".join(f"{v.deltas[r]:+.3f}" if abs(v.deltas[r]) > NOISE else "0" for r in repos)
            verdict = "no change" if not v.moved else ("pass" if v.passes else "FAIL")
            lines.append(
                f"| {rule} | {cells} | {v.helps} | {v.hurts} | {v.worst:+.3f} | {verdict} ({decision(by_mode)}) |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rules",
        default="",
        help="rules to switch off one at a time (default: every rule); `a+b` switches a and b off together",
    )
    ap.add_argument("--sets", default="python,multilang,multilang2")
    add_corpora_arguments(ap)
    ap.add_argument(
        "--cache",
        type=Path,
        default=STATIC_PROFILE_CACHE,
        help="the static profile's kept indexes (retrieval.py's `--cache`/profile-static)",
    )
    add_report_argument(ap)
    return ap


def run(args: argparse.Namespace) -> Report:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sets = bench_sets(args)
    known = RankingRules.names()
    names = [n for n in args.rules.split(",") if n] or list(known)
    unknown = sorted({part for n in names for part in n.split("+")} - set(known))
    if unknown:
        raise SystemExit(f"unknown rule(s) {unknown}; choose from {', '.join(known)}")
    indexer = SearchEngine(EngineConfig(cache_dir=args.cache, embedding_profile="static", watch=False))
    for bench in sets:
        for repo in bench.repos:
            indexer.indexes.update(bench.corpora / repo)
    base = measure(RankingRules(), sets, args.cache)
    results = {}
    for n, name in enumerate(names, 1):
        started = time.perf_counter()
        results[name] = verdicts(base, measure(switched_off(name), sets, args.cache))
        print(f"[{n}/{len(names)}] {name} off: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    repos = [repo for bench in sets for repo in bench.repos]
    overall = {mode: statistics.fmean(per_repo(base[mode]).values()) for mode in MODES}
    kept = [n for n, v in results.items() if decision(v) == "keep"]
    return Report(
        markdown=tables(results, repos),
        headline=f"{len(kept)} of {len(results)} rules pass; mean per-repository NDCG@10 with all on: "
        + ", ".join(f"{m} {v:.3f}" for m, v in overall.items()),
        figures={
            "base": {mode: per_repo(base[mode]) for mode in MODES},
            "rules": {n: {m: dataclasses.asdict(v) for m, v in by_mode.items()} for n, by_mode in results.items()},
        },
    )


def main() -> int:
    return main_over_sets(parser(), run)


if __name__ == "__main__":
    sys.exit(main())
