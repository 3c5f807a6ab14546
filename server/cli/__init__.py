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
_INTERMIXED = frozenset({"search", "index"})


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


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse `argv`, letting options follow positionals (`search def -i src/`) as grep does.

    argparse cannot intermix through a subcommand, so a subcommand that can (no `--` remainder,
    unlike `proxy`) parses its own arguments intermixed."""
    if argv and argv[0] in _INTERMIXED:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        command: argparse.ArgumentParser = commands.choices[argv[0]]
        return command.parse_intermixed_args(argv[1:])
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, list(sys.argv[1:] if argv is None else argv))
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
    except OSError as exc:
        # An unusable cache or output dir, say: an error (2), never grep's "nothing found" (1).
        print(f"codepager: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
