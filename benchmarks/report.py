"""What a benchmark hands back: the markdown its command prints and the figures behind it.

Every benchmark module exposes `run(args) -> Report` and keeps its own command line
(`python benchmarks/NAME.py ...` prints `report.markdown`). `--report-json FILE` also writes
the report as JSON: that is how `python -m benchmarks` collects each one, running it in its own
process so one benchmark's imports, threads and memory never colour another's numbers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Report:
    """One run of one benchmark.

    `markdown`: the tables and ratio lines, exactly as the command prints them.
    `headline`: one line with the main figure as a ratio against its peer, for the summary.
    `figures`: the numbers behind it (JSON values), for plots and for reading by programs.
    `target_met`: None when the benchmark has no pass/fail target.
    """

    markdown: str
    headline: str
    figures: dict[str, Any] = field(default_factory=dict)
    target_met: bool | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls(**json.loads(text))


def add_report_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--report-json",
        type=Path,
        metavar="FILE",
        help="also write the report (markdown, headline, figures) as JSON; used by python -m benchmarks",
    )


def counts_parser(doc: str | None, **counts: int) -> argparse.ArgumentParser:
    """The command line of a benchmark whose options are all whole numbers: one `--name`
    (underscores spelt as dashes) per keyword, defaulting to its value, plus `--report-json`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in counts.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    add_report_argument(parser)
    return parser


def emit(report: Report, args: argparse.Namespace) -> int:
    """Print the report, write its JSON if asked; exit status 1 when a target was missed."""
    print(report.markdown)
    if getattr(args, "report_json", None):
        Path(args.report_json).write_text(report.to_json(), encoding="utf-8")
    return 1 if report.target_met is False else 0


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def command(
    parser: Callable[[], argparse.ArgumentParser], run: Callable[[argparse.Namespace], Report]
) -> Callable[[], int]:
    """A benchmark's `main`: parse its arguments, run it, print and save the report; the exit
    status says whether every target was met (see `emit`)."""

    def main() -> int:
        args = parser().parse_args()
        return emit(run(args), args)

    return main
