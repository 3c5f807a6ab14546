"""NDCG@10 against cold index time, for codepager's embedding profiles and the peers.

People compare code-search tools on these two axes at a glance: how good the ranking is and
what it costs to get started. The points come from the retrieval benchmark's report
(`figures["runs"]`, one entry per system and query set: [python] and [multilang]), measured in
the same run; a system whose index was
not timed cold (a report from an older run, say) has no honest x value and is listed under
the chart instead of being placed on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOT_NAME = "ndcg_vs_index_time.png"
#: mode -> (marker, label offset in points): hybrid labels above their point, semantic below.
MODES = (("hybrid", "o", (7, 3)), ("semantic", "s", (7, -16)))


def points(runs: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, str, float, float]], list[str]]:
    """(system, mode, cold index seconds, NDCG@10 all) to plot, and the systems left out."""
    plotted, left_out = [], []
    for run in runs:
        # One point per system and query set (a report from before the sets has no `set`).
        name = f"{run['name']} [{run['set']}]" if run.get("set") else run["name"]
        if run.get("index_note") != "cold" or run.get("index_s") is None:
            left_out.append(f"{name} ({run.get('index_note') or 'no index time'})")
            continue
        for mode, _, _ in MODES:
            score = run.get("ndcg", {}).get(mode, {}).get("all")
            if score is not None:
                plotted.append((name, mode, float(run["index_s"]), float(score)))
    return plotted, left_out


def plot_ndcg_vs_index_time(runs: Sequence[dict[str, Any]], out: Path, subtitle: str = "") -> list[str]:
    """Write the chart to `out` (PNG); returns the systems left out (not timed cold)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator

    plotted, left_out = points(runs)
    if not plotted:
        raise ValueError("no system has both a cold index time and an NDCG@10 to plot")
    systems = list(dict.fromkeys(name for name, *_ in plotted))
    colours = {name: f"C{i}" for i, name in enumerate(systems)}
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    xs = [p[2] for p in plotted]
    rightmost = max(xs) if len(set(xs)) > 1 else None
    # Points right of the middle of the (log) x range are labelled on their left, inside the axes.
    middle = (min(xs) * max(xs)) ** 0.5 if rightmost else None
    for mode, marker, (dx, dy) in MODES:
        for name, m, seconds, score in plotted:
            if m != mode:
                continue
            ax.scatter(seconds, score, color=colours[name], marker=marker, s=70, zorder=3)
            left = middle is not None and seconds > middle
            ax.annotate(
                f"{name} {mode}: {score:.3f}, {seconds:.1f} s",
                (seconds, score),
                textcoords="offset points",
                xytext=(-dx if left else dx, dy),
                ha="right" if left else "left",
                fontsize=8,
            )
    ax.set_xscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("cold index time of the set's repositories (s, log scale)")
    ax.set_ylabel("NDCG@10, all queries of the set")
    ax.set_title("Retrieval quality against indexing cost" + (f"\n{subtitle}" if subtitle else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlim(min(xs) / 1.6, max(xs) * (1.6 if rightmost else 6))  # room for the labels
    ys = [p[3] for p in plotted]
    ax.set_ylim(max(0.0, min(ys) - 0.08), min(1.0, max(ys) + 0.06))
    legend = [Line2D([], [], color="grey", marker=mk, linestyle="", label=mode) for mode, mk, _ in MODES]
    ax.legend(handles=legend, loc="lower right", fontsize=8)
    if left_out:
        fig.text(0.01, 0.01, "not timed cold: " + "; ".join(left_out), fontsize=7, color="grey")
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
    return left_out


SCALE_PLOT_NAME = "scale_curves.png"
#: (title, unit, codepager's figure, semble's figure or None) per panel of the scale chart.
SCALE_PANELS = (
    ("cold index", "s", ("cold", "seconds"), ("semble", "seconds")),
    ("peak RSS while indexing", "MB", ("cold", "peak_rss_mb"), ("semble", "peak_rss_mb")),
    ("hybrid search p50", "ms", ("start", "hybrid_p50_ms"), ("semble", "hybrid_p50_ms")),
    ("update after 100 files edited", "s", ("update", "seconds"), None),
)


def scale_series(rows: Sequence[dict[str, Any]], figure: tuple[str, str]) -> tuple[list[int], list[float]]:
    """(copies, values) of one figure over the scale benchmark's rows, where it was measured."""
    step, key = figure
    pairs = [(int(r["copies"]), float(r[step][key])) for r in rows if key in r.get(step, {})]
    return [c for c, _ in pairs], [v for _, v in pairs]


def plot_scale(rows: Sequence[dict[str, Any]], out: Path, subtitle: str = "") -> None:
    """The scale benchmark's curves (`figures["rows"]`): one panel per figure, codepager
    and semble against the number of copies, written to `out` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("no scale rows to plot")
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5), dpi=120)
    for ax, (title, unit, ours, theirs) in zip(axes.flat, SCALE_PANELS, strict=True):
        for label, figure, colour in (("codepager", ours, "C0"), ("semble 0.7.0", theirs, "C1")):
            if figure is None:
                continue
            xs, ys = scale_series(rows, figure)
            if xs:
                ax.plot(xs, ys, marker="o", color=colour, label=label)
                for x, y in zip(xs, ys, strict=True):
                    ax.annotate(
                        f"{y:,.0f}" if y >= 100 else f"{y:.3g}",
                        (x, y),
                        textcoords="offset points",
                        xytext=(4, 4),
                        fontsize=7,
                    )
        ax.set_xscale("log", base=2)
        copies = sorted({int(r["copies"]) for r in rows})
        ax.set_xticks(copies, [f"{c}x" for c in copies])
        ax.set_title(f"{title} ({unit})", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Monorepo scale: N copies of sympy" + (f"\n{subtitle}" if subtitle else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)
