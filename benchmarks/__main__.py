"""Run the benchmark suite and rewrite docs/benchmarks.md from what it measured.

    python -m benchmarks                      # everything (about 20 minutes on 2 cores)
    python -m benchmarks --no-long            # skip indexing, retrieval (semble) and load
    python -m benchmarks --only paging,offload
    python -m benchmarks --skip load --quick  # smaller runs, to try the runner itself
    python -m benchmarks --list               # names and exact commands, nothing run
    python -m benchmarks --only retrieval --extra retrieval=--no-semble
                                              # append arguments to one benchmark's command

Each benchmark runs in its own process with the command its section shows. Its block in the
page (result against its peer, command, date and load, tables) is replaced; blocks of
benchmarks not run keep their previous figures, and prose outside the blocks is never touched.
With the retrieval benchmark, the NDCG@10 / cold index time chart is drawn too; with the
scale benchmark, its curves.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from benchmarks import doc
from benchmarks.plot import PLOT_NAME, SCALE_PLOT_NAME, plot_ndcg_vs_index_time, plot_scale, points
from benchmarks.suite import ROOT, SUITE, Outcome, command, run_one, select, with_extra_args

DEFAULT_DOC = ROOT / "docs" / "benchmarks.md"
BUDGET_MIN = 20


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", type=_names, metavar="A,B", help="run only these benchmarks")
    p.add_argument("--skip", type=_names, default=[], metavar="A,B", help="do not run these")
    p.add_argument(
        "--no-long", action="store_true", help="skip the long ones: " + ", ".join(b.name for b in SUITE if b.long)
    )
    p.add_argument(
        "--quick", action="store_true", help="fewer repetitions (figures are noisier; the page shows the command)"
    )
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="append ARGS to one benchmark's command, e.g. retrieval=--no-semble (repeatable)",
    )
    p.add_argument("--doc", type=Path, default=DEFAULT_DOC, help="page to update (default: docs/benchmarks.md)")
    p.add_argument("--no-write", action="store_true", help="run and print, but leave the page alone")
    p.add_argument("--list", action="store_true", help="list the benchmarks and their commands, run nothing")
    return p


def retrieval_extra(outcome: Outcome, directory: Path) -> str:
    """Draw the chart from the retrieval report; the markdown that shows it."""
    assert outcome.report is not None
    runs = outcome.report.figures.get("runs", [])
    plotted, left_out = points(runs)
    if not plotted:  # e.g. `--no-cold`: nothing was timed cold, so the chart keeps its last points
        return f"\n\nNo run was timed cold ({'; '.join(left_out)}), so the chart was not redrawn.\n"
    left_out = plot_ndcg_vs_index_time(runs, directory / PLOT_NAME, subtitle=f"measured {doc.now()}")
    note = f" Not timed cold, so not placed: {'; '.join(left_out)}." if left_out else ""
    return f"\n\n![NDCG@10 against cold index time]({PLOT_NAME})\n\nThe chart is drawn from the table above.{note}\n"


def scale_extra(outcome: Outcome, directory: Path) -> str:
    """Draw the scale curves from the scale report; the markdown that shows them."""
    assert outcome.report is not None
    plot_scale(outcome.report.figures["rows"], directory / SCALE_PLOT_NAME, subtitle=f"measured {doc.now()}")
    return f"\n\n![Monorepo scale curves]({SCALE_PLOT_NAME})\n\nThe chart is drawn from the tables above.\n"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        chosen = with_extra_args(select(args.only, args.skip, args.no_long), args.extra)
    except ValueError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for b in with_extra_args(list(SUITE), args.extra):
            print(f"{b.name:14} {'long ' if b.long else '     '} {command(b, args.quick)}")
        return 0
    if not chosen:
        print("benchmarks: nothing selected", file=sys.stderr)
        return 2

    machine = doc.machine_info(ROOT)
    load_start, started_at, started = doc.load_average(), doc.now(), time.perf_counter()
    print(f"machine: {machine.cpu_model}, {machine.cores} cores, load {load_start}", file=sys.stderr)
    blocks: dict[str, str] = {}
    failures: list[str] = []
    for i, bench in enumerate(chosen, 1):
        load, when = doc.load_average(), doc.now()
        print(f"[{i}/{len(chosen)}] {bench.name}: {command(bench, args.quick)}", file=sys.stderr, flush=True)
        outcome = run_one(bench, args.quick)
        if outcome.report is None:
            failures.append(bench.name)
            print(f"    FAILED after {outcome.seconds:.0f} s: {outcome.error}", file=sys.stderr)
            continue
        print(f"    {outcome.seconds:.0f} s: {outcome.report.headline}", file=sys.stderr, flush=True)
        markdown = outcome.report.markdown
        # Charts are files beside the page: drawn only when the page is written.
        if not args.no_write and bench.name == "retrieval" and outcome.report.figures.get("runs"):
            markdown += retrieval_extra(outcome, args.doc.parent)
        if not args.no_write and bench.name == "scale" and outcome.report.figures.get("rows"):
            markdown += scale_extra(outcome, args.doc.parent)
        blocks[bench.name] = doc.section_block(
            headline=outcome.report.headline,
            command=outcome.command,
            when=when,
            load=load,
            seconds=outcome.seconds,
            markdown=markdown,
        )

    minutes = (time.perf_counter() - started) / 60
    invocation = " ".join(["python -m benchmarks", shlex.join(argv if argv is not None else sys.argv[1:])]).strip()
    if not args.no_write and blocks:
        text = args.doc.read_text(encoding="utf-8") if args.doc.exists() else "# Benchmarks\n"
        titles = {b.name: b.title for b in SUITE}
        for name, body in blocks.items():
            text = doc.put_block(text, name, titles[name], body)
        body = doc.machine_block(
            machine,
            invocation=invocation,
            when=started_at,
            load_start=load_start,
            load_end=doc.load_average(),
            minutes=minutes,
            summary=doc.summary_table(text),
        )
        args.doc.write_text(doc.put_machine_block(text, body), encoding="utf-8")
        print(f"wrote {args.doc}", file=sys.stderr)
    print(
        f"{len(blocks)} benchmarks in {minutes:.1f} min" + (f"; failed: {', '.join(failures)}" if failures else ""),
        file=sys.stderr,
    )
    if minutes > BUDGET_MIN:
        print(f"warning: the suite took longer than its {BUDGET_MIN} min budget", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
