"""`codepager search`: the human path. Runs one search and prints every result, no paging.

Output is grep-like so it composes with the usual tools: `path:line:text` for a match,
`path-line-text` for a context line, `--` between separate context groups; `--jsonl` prints one
match record per line and `--json` one array, the records an MCP page, an offloaded file and a
saved dataset hold (`server.records`: compact, or the full shape with `--detail full`). Exit status is grep's: 0 found, 1 nothing
found, 2 error (message on stderr).

The allowed root is `server.roots` (default: the current directory), and PATH must resolve
inside it, exactly as for the MCP tools: the same `resolve_search_path` makes that rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from search_engine.engine import SearchEngine
from search_engine.errors import SearchError
from search_engine.models import MAX_CONTEXT_LINES, Match, SearchMode, SearchRequest
from search_engine.paths import resolve_search_path
from server.page_text import grep_lines
from server.records import Detail, compact_record, match_record
from server.settings import load_settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="search a codebase and print every match (grep-like, or JSON)",
        description="Search PATH (default: the current directory) and print every match.",
        epilog=(
            "exit status: 0 if something matched, 1 if nothing did, 2 on error\n"
            "examples:\n"
            "  codepager search 'def \\w+_page' src/\n"
            "  codepager search -i -C 2 --glob '*.py' todo\n"
            "  codepager search -F 'a.b(c)' --jsonl | jq .path\n"
            "  codepager search --hybrid 'where are retries handled' --top-k 5"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pattern", metavar="PATTERN", help="regex (ripgrep syntax), or a question with --sem/--hybrid")
    p.add_argument("path", metavar="PATH", nargs="?", help="directory or file inside the allowed root")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--regex", dest="mode", action="store_const", const=SearchMode.REGEX, help="regex search (default)")
    mode.add_argument("--sem", dest="mode", action="store_const", const=SearchMode.SEMANTIC, help="semantic search")
    mode.add_argument("--hybrid", dest="mode", action="store_const", const=SearchMode.HYBRID, help="hybrid search")
    p.set_defaults(mode=SearchMode.REGEX)
    p.add_argument("-i", "--ignore-case", action="store_true", help="case-insensitive")
    p.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is a literal string, not a regex")
    p.add_argument("-w", "--word-regexp", action="store_true", help="match whole words only")
    p.add_argument("-U", "--multiline", action="store_true", help="let matches span lines")
    p.add_argument("-C", "--context", type=_int_between(0, MAX_CONTEXT_LINES), default=0, metavar="N", help=f"lines of context (0..{MAX_CONTEXT_LINES})")
    p.add_argument("--glob", action="append", default=[], metavar="G", help="only files matching glob G (repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="G", help="skip files matching glob G (repeatable)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--jsonl", action="store_const", dest="output", const="jsonl", help="one JSON object per match")
    output.add_argument("--json", action="store_const", dest="output", const="json", help="one JSON array of matches")
    p.set_defaults(output="text")
    p.add_argument("--detail", choices=[d.value for d in Detail], default=Detail.COMPACT.value, help="--json/--jsonl: compact records (default) or the full shape with byte spans and ranks")
    p.add_argument("--limit", type=_int_between(1), metavar="N", help="stop after N matches (default: print every match)")
    p.add_argument("--top-k", type=_int_between(1), default=10, metavar="N", help="--sem/--hybrid: how many chunks to return (default: 10)")
    p.add_argument("--threshold", type=float, metavar="X", help="--sem: minimum cosine similarity; --hybrid: minimum score relative to the best (0..1)")
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
    try:
        settings = load_settings(args.config)
        location = resolve_search_path(args.path, settings.server.roots)
        request = SearchRequest(
            mode=args.mode,
            query=args.pattern,
            root=str(location.root),
            path=location.sub,
            include=args.glob,
            exclude=args.exclude,
            ignore_case=args.ignore_case,
            fixed_string=args.fixed_strings,
            whole_word=args.word_regexp,
            multiline=args.multiline,
            context_lines=args.context,
            # The human path prints every match; `search.max_results` bounds what a server keeps.
            max_results=args.limit or sys.maxsize,
            top_k=args.top_k,
            threshold=args.threshold,
        )
        result = SearchEngine(settings.engine_config()).search(request)
    except (SearchError, FileNotFoundError, ValueError) as exc:  # ValueError: pydantic validation
        return _fail(str(exc))
    _write(result.matches, args.output, Detail(args.detail), request.context_lines > 0, sys.stdout)
    for warning in result.warnings:
        print(f"codepager: warning: {warning}", file=sys.stderr)
    if result.truncated:
        print(
            f"codepager: showing the first {len(result.matches)} of {result.total_count} matches; "
            "raise --limit or narrow the search to see more",
            file=sys.stderr,
        )
    return 0 if result.matches else 1


def _fail(message: str) -> int:
    print(f"codepager: {message}", file=sys.stderr)
    return 2


def _write(matches: list[Match], output: str, detail: Detail, context: bool, out: TextIO) -> None:
    if output == "text":
        out.writelines(grep_lines((compact_record(m) for m in matches), context))
        return
    records = (match_record(m, detail=detail) for m in matches)
    if output == "jsonl":
        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        json.dump(list(records), out, ensure_ascii=False)
        out.write("\n")
