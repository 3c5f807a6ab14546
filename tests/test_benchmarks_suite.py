"""`python -m benchmarks`: selection, running a real benchmark in its own process, rewriting
only the generated blocks of the page, and the NDCG / index time chart.

Timings are not asserted (speed belongs in the benchmarks themselves); what is asserted is
that the runner collects what a benchmark reports and puts it where the page says."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from benchmarks import doc, suite
from benchmarks.__main__ import main
from benchmarks.plot import plot_ndcg_vs_index_time, points
from benchmarks.report import Report
from benchmarks.suite import SUITE, Benchmark, command, run_one, select

PAGE = """# Benchmarks

Intro written by hand.

## Paging

What paging measures, by hand.

<!-- bench:paging -->
**Result:** old result

Measured 2020-01-01, long ago.
<!-- /bench:paging -->

Notes by hand, kept.

## Proxy

Proxy prose.
"""


def test_every_benchmark_script_exists_and_the_long_ones_can_be_skipped():
    assert {b.name for b in SUITE} >= {
        "regex",
        "paging",
        "offload",
        "mcp_roundtrip",
        "chunked",
        "proxy",
        "indexing",
        "retrieval",
        "load",
        "freshness",
    }
    for bench in SUITE:
        assert bench.path.is_file(), bench.script
        assert command(bench).split()[1] == f"benchmarks/{bench.script}"
    quick = select(None, [], no_long=True)
    assert {b.name for b in quick}.isdisjoint({"retrieval", "load", "indexing"})
    assert [b.name for b in select(["paging", "retrieval"], [], no_long=True)] == ["paging", "retrieval"]
    assert "regex" not in {b.name for b in select(None, ["regex"], no_long=False)}
    with pytest.raises(ValueError, match=r"unknown benchmark.*choose from"):
        select(["nope"], [], no_long=False)


def test_put_block_replaces_inserts_and_appends_without_touching_prose():
    text = doc.put_block(PAGE, "paging", "Paging", "**Result:** new result\n\nMeasured 2026-01-02 now.\n")
    assert "old result" not in text and "**Result:** new result" in text
    assert "What paging measures, by hand." in text and "Notes by hand, kept." in text
    text = doc.put_block(text, "proxy", "Proxy", "**Result:** proxy result\n")
    assert re.search(
        r"## Proxy\n\nProxy prose.\n\n<!-- bench:proxy -->\n\*\*Result:\*\* proxy result\n<!-- /bench:proxy -->", text
    )
    text = doc.put_block(text, "load", "Load", "**Result:** load result\n")
    assert text.rstrip().endswith("## Load\n\n<!-- bench:load -->\n**Result:** load result\n<!-- /bench:load -->")
    rows = doc.summary_table(text)
    assert rows[2:] == [
        "| [Paging](#paging) | new result | 2026-01-02 |",
        "| [Proxy](#proxy) | proxy result | — |",
        "| [Load](#load) | load result | — |",
    ]
    with_machine = doc.put_machine_block(text, "machine facts\n")
    assert with_machine.startswith("# Benchmarks\n\n<!-- bench:machine -->\nmachine facts\n<!-- /bench:machine -->")
    assert doc.put_machine_block(with_machine, "newer facts\n").count("<!-- bench:machine -->") == 1


def test_machine_info_reads_this_machine():
    machine = doc.machine_info(Path.cwd())
    assert machine.cores >= 1 and machine.memory_gib > 0
    assert re.match(r"\d+\.\d+", machine.rg), machine.rg
    assert machine.python == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"


def test_run_one_runs_a_real_benchmark_in_its_own_process():
    bench = Benchmark("paging", "Paging", ("--results", "400", "--files", "8", "--first-runs", "2", "--repeats", "20"))
    outcome = run_one(bench)
    assert outcome.error is None and outcome.report is not None
    assert "| page N>1 from the session cache |" in outcome.report.markdown
    assert outcome.report.figures["cached_speedup"] > 1
    assert outcome.command == command(bench)
    assert "faster than page 1" in outcome.report.headline


def test_a_script_without_a_report_is_shown_as_it_prints(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "HERE", tmp_path)  # where `Benchmark.path` finds the scripts
    script = tmp_path / "plain.py"
    script.write_text("print('| a | b |')\nprint('|---|---|')\nprint('| 1 | 2 |')\n")
    outcome = run_one(Benchmark("plain", "Plain"))
    assert outcome.report == Report(markdown="| a | b |\n|---|---|\n| 1 | 2 |", headline="see the table")
    script.write_text("raise SystemExit('broken on purpose')\n")
    failed = run_one(Benchmark("plain", "Plain"))
    assert failed.report is None and failed.error is not None and "broken on purpose" in failed.error


def _between(name: str, text: str) -> str:
    found = re.search(rf"<!-- bench:{name} -->\n(.*?)<!-- /bench:{name} -->", text, re.S)
    assert found is not None, f"no bench:{name} block"
    return found[1]


@pytest.mark.slow
def test_suite_rewrites_only_its_blocks(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    assert main(["--only", "paging", "--quick", "--doc", str(page)]) == 0
    text = page.read_text()
    assert "Notes by hand, kept." in text and "Proxy prose." in text and "old result" not in text
    block = _between("paging", text)
    assert "Command: `" in block and "benchmarks/paging.py --first-runs 3 --repeats 50`" in block
    assert re.search(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC, load average [\d.]+ / [\d.]+ / [\d.]+", block)
    machine = _between("machine", text)
    assert "| CPU |" in machine and "| ripgrep |" in machine and "at the start" in machine
    assert "| [Paging](#paging) | a cached page is" in machine
    assert main(["--only", "nope", "--doc", str(page)]) == 2


SAMPLE_RUNS = [
    {
        "name": "codepager static",
        "index_s": 3.6,
        "index_note": "cold",
        "ndcg": {"hybrid": {"all": 0.866}, "semantic": {"all": 0.79}, "lexical": {"all": 0.7}},
    },
    {
        "name": "codepager minilm",
        "index_s": 1.2,
        "index_note": "loading the cached index",
        "ndcg": {"hybrid": {"all": 0.88}, "semantic": {"all": 0.83}},
    },
    {"name": "semble 0.7.0", "index_s": 5.4, "index_note": "cold", "ndcg": {"hybrid": {"all": 0.80}}},
]


@pytest.mark.slow
def test_plot_places_cold_timed_systems_and_lists_the_others(tmp_path):
    plotted, left_out = points(SAMPLE_RUNS)
    assert sorted(plotted) == sorted(
        [
            ("codepager static", "hybrid", 3.6, 0.866),
            ("codepager static", "semantic", 3.6, 0.79),
            ("semble 0.7.0", "hybrid", 5.4, 0.80),
        ]
    )
    assert left_out == ["codepager minilm (loading the cached index)"]
    out = tmp_path / "chart.png"
    assert plot_ndcg_vs_index_time(SAMPLE_RUNS, out, subtitle="sample numbers") == left_out
    import matplotlib.image

    image = matplotlib.image.imread(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.shape[0] > 300 and image.shape[1] > 500
    with pytest.raises(ValueError, match="no system"):
        plot_ndcg_vs_index_time(SAMPLE_RUNS[1:2], tmp_path / "none.png")


def test_plot_gives_each_query_set_its_own_points():
    runs = [
        {
            "name": "codepager static",
            "set": "python",
            "index_s": 2.4,
            "index_note": "cold",
            "ndcg": {"hybrid": {"all": 0.88}},
        },
        {
            "name": "codepager static",
            "set": "multilang",
            "index_s": 30.0,
            "index_note": "cold",
            "ndcg": {"hybrid": {"all": 0.76}},
        },
    ]
    plotted, left_out = points(runs)
    assert sorted(plotted) == [
        ("codepager static [multilang]", "hybrid", 30.0, 0.76),
        ("codepager static [python]", "hybrid", 2.4, 0.88),
    ]
    assert left_out == []


SCALE_ROWS = [
    {"copies": c, "cold": {"seconds": 10.0 * c, "peak_rss_mb": 200 + 50 * c, "workers_rss_mb": 180, "chunks": 54000 * c,
                           "disk_mb": 43 * c},
     "start": {"first_search_s": 0.5, "rss_after_mb": 200, "regex_p50_ms": 40, "semantic_p50_ms": 5,
               "hybrid_p50_ms": 15 * c},
     "update": {"seconds": 1.0 + 0.1 * c},
     **({"semble": {"seconds": 90.0 * c, "peak_rss_mb": 600 * c, "hybrid_p50_ms": 35 * c}} if c <= 2 else {})}
    for c in (1, 2, 4, 8)
]  # fmt: skip


@pytest.mark.slow
def test_scale_curves_follow_both_systems_where_each_was_measured(tmp_path):
    from benchmarks.__main__ import scale_extra
    from benchmarks.plot import SCALE_PLOT_NAME, scale_series
    from benchmarks.scale import report
    from benchmarks.suite import Outcome

    assert scale_series(SCALE_ROWS, ("cold", "seconds")) == ([1, 2, 4, 8], [10.0, 20.0, 40.0, 80.0])
    assert scale_series(SCALE_ROWS, ("semble", "seconds")) == ([1, 2], [90.0, 180.0])  # not run at 4x and 8x
    scale = report(SCALE_ROWS)
    assert "| 8x | 432,000 | 80.0 s | 600 MB (+ 180 MB) |" in scale.markdown
    assert "| 2x | semble 0.7.0 | 180.0 s |" in scale.markdown
    bench = next(b for b in SUITE if b.name == "scale")
    markdown = scale_extra(Outcome(bench, "scale.py", 1.0, scale), tmp_path)
    assert f"]({SCALE_PLOT_NAME})" in markdown
    import matplotlib.image

    image = matplotlib.image.imread(tmp_path / SCALE_PLOT_NAME)
    assert image.shape[0] > 500 and image.shape[1] > 700


def test_a_retrieval_run_without_cold_timings_leaves_the_chart_alone(tmp_path):
    """`--no-cold` runs time no cold build: nothing to place on the chart, so it is not redrawn
    (drawing it raised before) and the page says why."""
    from benchmarks.__main__ import retrieval_extra
    from benchmarks.plot import PLOT_NAME
    from benchmarks.suite import Outcome

    runs = [{"name": "codepager static", "set": "python", "index_note": "not timed (--no-cold)", "ndcg": {}}]
    report = Report(markdown="| t |", headline="h", figures={"runs": runs})
    bench = next(b for b in SUITE if b.name == "retrieval")
    markdown = retrieval_extra(Outcome(bench, "retrieval.py", 1.0, report), tmp_path)
    assert "not redrawn" in markdown and "codepager static [python] (not timed (--no-cold))" in markdown
    assert not (tmp_path / PLOT_NAME).exists()


def test_retrieval_runs_the_static_profile_with_another_model_directory(tmp_path, monkeypatch):
    """`--static-model DIR` swaps the model the static profile runs (to compare distilled
    models on the same queries); other profiles, and runs without it, keep their own."""
    import shutil

    monkeypatch.setattr(sys, "path", sys.path.copy())  # the script points sys.path[0] at the root
    from benchmarks.retrieval import engine_config, parser
    from search_engine.embedding.embedder import STATIC_MODEL_DIR, resolve_model

    candidate = tmp_path / "candidate"
    shutil.copytree(STATIC_MODEL_DIR, candidate)
    cache = tmp_path / "cache"
    swapped = parser().parse_args(["--static-model", str(candidate)])
    spec = resolve_model(engine_config("static", cache, swapped))
    assert (spec.kind, spec.source) == ("static", str(candidate.resolve()))
    assert engine_config("minilm", cache, swapped).embedding_model is None
    shipped = resolve_model(engine_config("static", cache, parser().parse_args([])))
    assert shipped.source == str(STATIC_MODEL_DIR)
