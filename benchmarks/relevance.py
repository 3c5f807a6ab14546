"""Calibrates the relevance floor: the best cosine similarity below which a query is taken as
unrelated to every chunk of the code searched (`search_engine.embedding.embedder.STATIC_RELEVANCE_FLOOR`).

A hybrid answer scores its best result 1.0 whatever it found, so an agent asking something the
code cannot answer could not tell. Every semantic and hybrid answer now carries
`best_similarity`, the best cosine of the query with a chunk it could rank, and says "low
relevance" below the floor. The floor must stay below what real questions reach (a false alarm
tells an agent to give up on a good answer) and above what questions no code answers reach.

For each repository of the benchmark kit's three labelled sets (`python`: 81 queries over 4
Python packages; `multilang`: 150 over 8 repositories in 7 languages; `multilang2`: 55 over 3
more, in Java, TypeScript and C++), it builds the real index and runs, through
`SearchEngine.search` in hybrid mode:

- `labelled`: the set's own queries, each asked of its repository (every one has an answer);
- `off_topic`: questions no code answers (cooking, sport, travel, ...), asked of every repository;
- `absent`: technical questions about things none of these repositories does (GPU shaders,
  Bluetooth pairing, ...), asked of every repository: reported, not calibrated on, since a
  word of one may well occur in some repository.

It prints each group's distribution, the share of each group below each candidate floor, the
floor this rule picks (the highest candidate at least `MARGIN` below the labelled queries' 1st
percentile: people and agents word questions less like the code than the benchmark does), and
the share of each group the engine flags `low_relevance` with the floor it ships (which also
spares a hybrid search that found a definition of a name the query names).

usage: python benchmarks/relevance.py [--corpora DIR] [--multilang-corpora DIR]
       [--multilang2-corpora DIR] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # benchmarks/regex.py would shadow `regex` (see retrieval.py)

from benchmarks.retrieval import (
    STATIC_PROFILE_CACHE,
    BenchSet,
    add_corpora_arguments,
    all_sets,
    corpora_missing,
    load_queries,
)
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import STATIC_RELEVANCE_FLOOR
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest

#: Questions no code answers.
OFF_TOPIC = (
    "recipe for a chocolate cake with strawberries",
    "who won the football world cup in 1998",
    "what is the capital of Australia",
    "symptoms of the common cold in children",
    "best hiking trails in the Alps in summer",
    "how to grow tomatoes on a balcony",
    "the plot of Shakespeare's Hamlet",
    "mortgage interest rates for first-time buyers",
    "how do whales communicate underwater",
    "train timetable from Paris to Lyon",
    "knitting a wool scarf for beginners",
    "the history of the Roman Empire",
    "how to fix a flat bicycle tyre",
    "which wine goes with grilled salmon",
    "yoga poses for lower back pain",
    "the life cycle of a butterfly",
    "how to tune a guitar by ear",
    "weather forecast for tomorrow in London",
    "how many calories are in a banana",
    "when do swallows migrate south in autumn",
    "planting a vegetable garden in spring",
    "watercolour landscape painting techniques",
    "the price of gold per ounce today",
    "how to teach a puppy to sit",
    "famous paintings in the Louvre museum",
    "volcanic eruptions in Iceland",
    "baking sourdough bread with a starter",
    "marathon training plan for beginners",
    "what do pandas eat in the wild",
    "how to remove a red wine stain from a carpet",
)
#: Technical questions about things none of the benchmark's repositories does.
ABSENT = (
    "compile GPU shaders for a game engine",
    "pair Bluetooth headphones with a phone",
    "compute a satellite's orbit from its two-line elements",
    "reconstruct an MRI image from k-space data",
    "mine a block in a proof-of-work blockchain",
    "render a PDF invoice with a company logo",
    "train a convolutional neural network on images of cats",
    "control a robot arm's joints with inverse kinematics",
    "send an SMS through a GSM modem",
    "read GPS coordinates from a serial port",
)
FLOORS = (0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50)
#: How far under the labelled queries' 1st percentile the floor stays.
MARGIN = 0.05
#: One query's answer: its best similarity, and whether the engine flagged it low_relevance.
Answer = tuple[float, bool]


def best_similarity(engine: SearchEngine, root: Path, query: str) -> Answer:
    result = engine.search(SearchRequest(mode=SearchMode.HYBRID, query=query, root=str(root), top_k=10))
    assert result.best_similarity is not None, (root, query)
    return result.best_similarity, result.low_relevance


def measure(sets: Iterable[BenchSet], cache: Path) -> dict[str, list[Answer]]:
    """Every query's answer, by group."""
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    groups: dict[str, list[Answer]] = {"labelled": [], "off_topic": [], "absent": []}
    for bench in sets:
        for repo in bench.repos:
            root = (bench.corpora / repo).resolve()
            engine.indexes.update(root)
            print(f"indexed {bench.name}/{repo}", file=sys.stderr)
            for question in OFF_TOPIC:
                groups["off_topic"].append(best_similarity(engine, root, question))
            for question in ABSENT:
                groups["absent"].append(best_similarity(engine, root, question))
        for repo, item in load_queries(bench):
            groups["labelled"].append(best_similarity(engine, (bench.corpora / repo).resolve(), item["query"]))
    return groups


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(groups: dict[str, list[Answer]]) -> str:
    similarities = {g: [s for s, _ in answers] for g, answers in groups.items()}
    lines = ["| group | n | min | 1% | 5% | median | 95% | max |", "|---|---|---|---|---|---|---|---|"]
    for name, values in similarities.items():
        cells = [min(values), quantile(values, 0.01), quantile(values, 0.05), statistics.median(values)]
        cells += [quantile(values, 0.95), max(values)]
        lines.append(f"| {name} | {len(values)} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    lines += ["", "| floor | " + " | ".join(f"{g} below" for g in groups) + " |", "|---|---|---|---|"]
    for floor in FLOORS:
        shares = [sum(v < floor for v in values) / len(values) for values in similarities.values()]
        lines.append(f"| {floor:.2f} | " + " | ".join(f"{share:.1%}" for share in shares) + " |")
    highest = quantile(similarities["labelled"], 0.01) - MARGIN
    chosen = max((f for f in FLOORS if f <= highest), default=None)
    flagged = ", ".join(f"{g} {sum(low for _, low in a) / len(a):.1%}" for g, a in groups.items())
    lines += [
        "",
        f"floor by the rule: {chosen} (the 1st percentile of the labelled queries less {MARGIN})",
        f"flagged low_relevance by the engine (floor {STATIC_RELEVANCE_FLOOR}): {flagged}",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpora_arguments(ap)
    ap.add_argument("--cache", type=Path, default=STATIC_PROFILE_CACHE)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sets = list(all_sets(args).values())
    if corpora_missing(sets):
        return 2
    print(report(measure(sets, args.cache)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
