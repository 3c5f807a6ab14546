"""The `codepager` command. Each subcommand lives in its own module under `server/cli/` and
exposes `register(subparsers)`, which adds its parser and sets `func` to a handler taking the
parsed namespace and returning an exit status.

Exit status follows grep: 0 found, 1 nothing found, 2 error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from server import __version__
from server.cli import config_cmd, index_cmd, proxy_cmd, search_cmd, serve_cmd

EPILOG = """examples:
  codepager search 'def \\w+_page' src/          regex search, grep-like output
  codepager search -i -C 2 --glob '*.py' TODO    case-insensitive, 2 lines of context
  codepager search --hybrid "where are retries handled" --jsonl
  codepager index .                              build or update the semantic index
  codepager serve --root .                       MCP server over stdio
  codepager proxy -- npx -y @modelcontextprotocol/server-filesystem .
                                                 another MCP server, large results saved as datasets
"""

_SUBCOMMANDS = (search_cmd, index_cmd, serve_cmd, proxy_cmd, config_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codepager",
        description="Regex, semantic and hybrid code search for people and AI agents (MCP).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"codepager {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `codepager search ... | head` closes the pipe early; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
