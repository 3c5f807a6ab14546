"""The benchmark suite: which benchmarks exist, with which arguments, and how one is run.

Each benchmark runs as its own process (`python benchmarks/NAME.py ARGS --report-json FILE`),
exactly the command docs/benchmarks.md shows without the last option, so a reader can re-run
any figure by copying its command. A script that does not (yet) write a report is run as is
and its standard output becomes its section.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.report import Report

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the suite, run as `benchmarks/NAME.py` (`script`).

    `args`: what the suite passes (the owner's documented command); `quick_args`: a smaller run
    for trying the runner (`--quick`); `long`: minutes, skipped by `--no-long`;
    `collect`: turns a script's raw output into a Report when it has no `--report-json`
    (its stdout, and the file named by its `out_option` if it has one)."""

    name: str
    title: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] | None = None
    long: bool = False
    timeout_s: float = 900.0
    collect: Callable[[str, Path], Report] | None = None
    out_option: str | None = None

    @property
    def script(self) -> str:
        """Each script is named after its benchmark, so the name alone says which to run."""
        return f"{self.name}.py"

    @property
    def path(self) -> Path:
        return HERE / self.script

    def argv(self, quick: bool) -> list[str]:
        return list(self.quick_args if quick and self.quick_args is not None else self.args)

    def writes_report(self) -> bool:
        """Whether the script takes --report-json (it builds its parser with add_report_argument,
        or with counts_parser, which adds it)."""
        source = self.path.read_text(encoding="utf-8")
        return any(name in source for name in ("add_report_argument", "counts_parser"))


def _python() -> str:
    """How the docs spell this interpreter: relative to the repository when it is its venv."""
    exe = Path(sys.executable)
    try:
        return str(exe.relative_to(ROOT))
    except ValueError:
        return "python"


def command(bench: Benchmark, quick: bool = False) -> str:
    """The exact command line that produces the benchmark's figures."""
    return shlex.join([_python(), f"benchmarks/{bench.script}", *bench.argv(quick)])


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _flatten(v, f"{prefix}{k}.")]
    if isinstance(value, list):
        return []  # samples and per-item detail: in the script's own output
    return [(prefix[:-1], value)]


def collect_load(stdout: str, out: Path) -> Report:
    """benchmarks/load.py writes its results as JSON (`--out`); shown as a metric table."""
    results = json.loads(out.read_text(encoding="utf-8"))
    rows = ["| metric | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in _flatten(results) if k != "cpus")]
    load = results.get("load", {})
    headline = (
        f"{load.get('clients')} concurrent clients, {load.get('searches')} page walks: {load.get('errors')} errors, "
        f"p50 {load.get('p50_ms')} ms, p99 {load.get('p99_ms')} ms per call "
        "(no peer: correctness and bounds under load)"
        if load
        else "see the table (no peer: correctness and bounds under load)"
    )
    return Report(markdown="\n".join(rows), headline=headline, figures=results)


def collect_ablation(stdout: str, _: Path) -> Report:
    """benchmarks/chunk_ablation.py prints one table; the shipped row against the best one."""
    rows = [line.split("|")[1:-1] for line in stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]

    def label(r: list[str]) -> str:
        return f"{r[0].strip()} chars, name weight {r[1].replace('(shipped)', '').strip()}"

    scores = {label(r): float(r[-1]) for r in rows}
    shipped = next((label(r) for r in rows if "shipped" in r[1]), None)
    best = max(scores, key=scores.__getitem__) if scores else None
    headline = (
        f"semantic-only NDCG@10 {scores[shipped]:.3f} with the shipped chunking ({shipped}); "
        f"best variant {best}: {scores[best]:.3f} (an ablation: the peer is each other variant)"
        if shipped and best
        else "see the table"
    )
    return Report(markdown=stdout.strip(), headline=headline, figures={"ndcg_all": scores})


def collect_stdout(stdout: str, _: Path) -> Report:
    """A script without a report: its output is the section, as it printed it."""
    return Report(markdown=stdout.strip(), headline="see the table")


SUITE: tuple[Benchmark, ...] = (
    Benchmark(
        "regex",
        "Regex search",
        ("--repeats", "11", "--naive-repeats", "3"),
        quick_args=("--repeats", "2", "--naive-repeats", "1"),
    ),
    Benchmark("paging", "Paging", quick_args=("--first-runs", "3", "--repeats", "50")),
    Benchmark("offload", "Offload", quick_args=("--repeats", "30", "--big-repeats", "2")),
    Benchmark("mcp_roundtrip", "MCP round trip", quick_args=("--repeats", "10")),
    Benchmark("chunked", "Chunked stdio", quick_args=("--runs", "2")),
    Benchmark("proxy", "Proxy", quick_args=("--calls", "30", "--repeats", "3")),
    Benchmark("tokens", "Answer size", ("--recall",), quick_args=("--names", "fastapi"), timeout_s=2400),
    Benchmark("indexing", "Indexing", long=True),
    Benchmark("top_k", "Large top_k", quick_args=("--repeats", "1"), long=True),
    Benchmark("chunk_ablation", "Chunk size and chunk text", long=True, collect=collect_ablation),
    Benchmark("retrieval", "Retrieval quality", long=True, timeout_s=3600),
    Benchmark("load", "Load", long=True, timeout_s=1500, collect=collect_load, out_option="--out"),
    Benchmark("scale", "Monorepo scale", quick_args=("--sizes", "1", "--semble-sizes", "1"), long=True, timeout_s=7200),
    Benchmark(
        "warm",
        "Warm queries with change detection live",
        quick_args=("--trees", "sympy-1x", "--repeats", "2"),
        long=True,
        timeout_s=3600,
    ),
    Benchmark(
        "freshness",
        "Freshness",
        quick_args=("--sizes", "1", "--trials", "10", "--repeats", "2", "--checkout", "50", "--idle-s", "2"),
        long=True,
        timeout_s=7200,
    ),
)


@dataclass
class Outcome:
    bench: Benchmark
    command: str
    seconds: float
    report: Report | None
    error: str | None = None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_one(bench: Benchmark, quick: bool = False) -> Outcome:
    """Run one benchmark in its own process (its own process group, killed whole on timeout)."""
    shown = command(bench, quick)
    with tempfile.TemporaryDirectory(prefix=f"codepager-bench-{bench.name}-") as tmp:
        out = Path(tmp) / "report.json"
        extra = (
            ["--report-json", str(out)]
            if bench.writes_report()
            else ([bench.out_option, str(out)] if bench.out_option else [])
        )
        argv = [sys.executable, str(bench.path), *bench.argv(quick), *extra]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            stdout, stderr = proc.communicate(timeout=bench.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome(
                bench, shown, time.perf_counter() - started, None, f"timed out after {bench.timeout_s:.0f} s"
            )
        seconds = time.perf_counter() - started
        try:
            if bench.writes_report():
                report = Report.from_json(out.read_text(encoding="utf-8"))
            elif proc.returncode == 0:
                report = (bench.collect or collect_stdout)(stdout, out)
            else:
                report = None
        except (OSError, ValueError, KeyError) as exc:
            report = None
            stderr += f"\n(report unreadable: {exc})"
        if report is None:
            return Outcome(bench, shown, seconds, None, f"exit status {proc.returncode}\n{_tail(stderr)}")
        return Outcome(bench, shown, seconds, report)


def with_extra_args(chosen: list[Benchmark], extra: list[str]) -> list[Benchmark]:
    """Apply `NAME=ARGS` overrides: ARGS (shell words) are appended to NAME's arguments."""
    added: dict[str, list[str]] = {}
    for item in extra:
        name, sep, words = item.partition("=")
        if not sep or name not in {b.name for b in SUITE}:
            raise ValueError(
                f"--extra wants NAME=ARGS with NAME one of {', '.join(b.name for b in SUITE)}; got {item!r}"
            )
        added.setdefault(name, []).extend(shlex.split(words))
    return [
        replace(
            b,
            args=(*b.args, *added[b.name]),
            quick_args=None if b.quick_args is None else (*b.quick_args, *added[b.name]),
        )
        if b.name in added
        else b
        for b in chosen
    ]


def select(only: list[str] | None, skip: list[str], no_long: bool) -> list[Benchmark]:
    """The benchmarks to run, in suite order; unknown names are an error listing the known ones."""
    names = {b.name for b in SUITE}
    unknown = sorted({*(only or []), *skip} - names)
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(b.name for b in SUITE)}")
    return [
        b
        for b in SUITE
        if (only is None or b.name in only) and b.name not in skip and not (no_long and b.long and not only)
    ]
