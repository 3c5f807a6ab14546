"""`codepager search`: the human path. Runs one search and prints every result, no paging.

It behaves like rg where they overlap: any PATHs the user names are searched (several
allowed, default the working directory; `server.roots` binds servers, not the user's own
shell) and printed as rg prints them (`search_targets.py`). Output is grep-like so it
composes with the usual tools: `path:line:text` for a match, `path-line-text` for a context
line, `--` between separate context groups; `--jsonl` prints one match record per line and
`--json` one array, with the same paths: the records an MCP page, an offloaded file and a
saved dataset hold (`server.records`: compact, or the full shape with `--detail full`). Exit
status is rg's: 0 found, 1 nothing found, 2 on an error (message on stderr), including a PATH
that does not exist (the others are still searched). An option that does not apply to the
chosen mode is an error, not ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import msgspec

from search_engine import (
    DEFAULT_TOP_K,
    MAX_CONTEXT_LINES,
    Match,
    SearchEngine,
    SearchError,
    SearchMode,
    SearchRequest,
    SearchResult,
)
from server.cli.search_targets import MissingPathError, Target, resolve_target
from server.page_text import grep_lines, one_line
from server.records import Detail, compact_record, match_record
from server.settings import load_settings

# (argparse dest, how the option is spelled): options that only one kind of search uses.
_REGEX_ONLY = (
    ("ignore_case", "-i/--ignore-case"),
    ("fixed_string", "-F/--fixed-strings"),
    ("whole_word", "-w/--word-regexp"),
    ("multiline", "-U/--multiline"),
    ("context", "-C/--context"),
    ("limit", "--limit"),
)
_RANKED_ONLY = (("top_k", "--top-k"), ("threshold", "--threshold"))
_PASSED_THROUGH = ("mode", "ignore_case", "fixed_string", "whole_word", "multiline", "include", "exclude", "threshold")
"""The options whose `dest` is the `SearchRequest` field they set, passed on as parsed."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "search",
        help="search a codebase and print every match (grep-like, or JSON)",
        description="Search each PATH (default: the current directory) and print every match.",
        epilog=(
            "exit status: 0 if something matched, 1 if nothing did, 2 on error\n"
            "examples:\n"
            "  codepager search 'def \\w+_page' src/ ../other-repo\n"
            "  codepager search -i -C 2 --glob '*.py' todo\n"
            "  codepager search -F 'a.b(c)' --jsonl | jq .path\n"
            "  codepager search --hybrid 'where are retries handled' --top-k 5"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pattern", metavar="PATTERN", help="regex (ripgrep syntax), or a question with --sem/--hybrid")
    p.add_argument(
        "paths",
        metavar="PATH",
        nargs="*",
        default=[],  # a default makes argparse treat PATH as optional when it reports what is missing
        help="directories or files to search (default: the current directory)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--regex", dest="mode", action="store_const", const=SearchMode.REGEX, help="regex search (default)"
    )
    mode.add_argument("--sem", dest="mode", action="store_const", const=SearchMode.SEMANTIC, help="semantic search")
    mode.add_argument("--hybrid", dest="mode", action="store_const", const=SearchMode.HYBRID, help="hybrid search")
    p.set_defaults(mode=SearchMode.REGEX)
    p.add_argument("-i", "--ignore-case", action="store_true", help="regex: case-insensitive")
    p.add_argument(
        "-F", "--fixed-strings", dest="fixed_string", action="store_true", help="regex: PATTERN is a literal string"
    )
    p.add_argument("-w", "--word-regexp", dest="whole_word", action="store_true", help="regex: match whole words only")
    p.add_argument("-U", "--multiline", action="store_true", help="regex: let matches span lines")
    p.add_argument(
        "-C",
        "--context",
        type=_int_between(0, MAX_CONTEXT_LINES),
        metavar="N",
        help=f"regex: lines of context (0..{MAX_CONTEXT_LINES})",
    )
    p.add_argument(
        "--glob",
        dest="include",
        action="append",
        default=[],
        metavar="G",
        help="only files matching glob G (repeatable)",
    )
    p.add_argument(
        "--exclude", action="append", default=[], metavar="G", help="skip files matching glob G (repeatable)"
    )
    output = p.add_mutually_exclusive_group()
    output.add_argument("--jsonl", action="store_const", dest="output", const="jsonl", help="one JSON object per match")
    output.add_argument("--json", action="store_const", dest="output", const="json", help="one JSON array of matches")
    p.set_defaults(output="text")
    p.add_argument(
        "--detail",
        choices=[d.value for d in Detail],
        default=Detail.COMPACT.value,
        help="--json/--jsonl: compact records (default) or the full shape with byte spans and ranks",
    )
    p.add_argument(
        "--limit", type=_int_between(1), metavar="N", help="regex: stop after N matches (default: print every match)"
    )
    p.add_argument(
        "--top-k",
        type=_int_between(1),
        metavar="N",
        help=f"--sem/--hybrid: how many chunks to return per PATH (default: {DEFAULT_TOP_K})",
    )
    p.add_argument(
        "--threshold",
        type=float,
        metavar="X",
        help="--sem: minimum cosine similarity; --hybrid: minimum score relative to the best (0..1)",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML settings file")
    p.set_defaults(func=run)


def _int_between(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], with a message saying the allowed range."""
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer of at least {low}"

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value!r}") from None
        if n < low or (high is not None and n > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {n}")
        return n

    return parse


def run(args: argparse.Namespace) -> int:
    misused = _misused_option(args)
    if misused:
        return _fail(misused)
    status = 0
    targets: list[Target] = []
    for given in args.paths or [None]:
        try:
            targets.append(resolve_target(given))
        except MissingPathError as exc:  # like rg: say so, search the other paths, exit 2
            print(f"codepager: {exc}", file=sys.stderr)
            status = 2
    try:
        settings = load_settings(args.config)
        engine = SearchEngine(settings.engine_config())
        found = [(target, _search(engine, target, args)) for target in targets]
    except (SearchError, FileNotFoundError, ValueError) as exc:  # ValueError: pydantic validation
        return _fail(str(exc))
    matches = [msgspec.structs.replace(m, path=t.shown(m.path)) for t, result in found for m in result.matches]
    total = sum(result.total_count for _, result in found)
    if args.limit is not None:
        del matches[args.limit :]
    with_name = len(args.paths) != 1 or not targets or not targets[0].is_file  # rg's rule
    _write(matches, args.output, Detail(args.detail), bool(args.context), with_name, sys.stdout)
    for _, result in found:
        for warning in result.warnings:
            print(f"codepager: warning: {one_line(warning)}", file=sys.stderr)
    if total > len(matches):
        print(
            f"codepager: showing the first {len(matches)} of {total} matches; "
            "raise --limit or narrow the search to see more",
            file=sys.stderr,
        )
    return status or (0 if matches else 1)


def _misused_option(args: argparse.Namespace) -> str | None:
    """Why an option given does not fit the mode (None: all fit). Ignoring it silently would
    answer another question than the one asked."""
    ranked = args.mode is not SearchMode.REGEX
    for dest, spelled in _REGEX_ONLY if ranked else _RANKED_ONLY:
        value = getattr(args, dest)
        if value is None or value is False:  # not given (-C 0 is given)
            continue
        if ranked:
            mode = "--sem" if args.mode is SearchMode.SEMANTIC else "--hybrid"
            return f"{spelled} applies to regex search only, not {mode}; drop it"
        return f"{spelled} applies to --sem and --hybrid only, not regex search; drop it or add --sem or --hybrid"
    return None


def _search(engine: SearchEngine, target: Target, args: argparse.Namespace) -> SearchResult:
    """Run the search the options describe over one target."""
    request = SearchRequest(
        **{name: getattr(args, name) for name in _PASSED_THROUGH},
        query=args.pattern,
        root=str(target.location.root),
        path=target.location.sub,
        context_lines=args.context or 0,
        # The human path prints every match; `search.max_results` bounds what a server keeps.
        max_results=args.limit or sys.maxsize,
        top_k=args.top_k or DEFAULT_TOP_K,
    )
    return engine.search(request)


def _fail(message: str) -> int:
    print(f"codepager: {message}", file=sys.stderr)
    return 2


def _write(matches: list[Match], output: str, detail: Detail, context: bool, with_name: bool, out: TextIO) -> None:
    if output == "text":
        out.writelines(grep_lines((compact_record(m) for m in matches), context, with_name=with_name))
        return
    records = (match_record(m, detail=detail) for m in matches)
    if output == "jsonl":
        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        json.dump(list(records), out, ensure_ascii=False)
        out.write("\n")
