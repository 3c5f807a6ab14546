"""`codepager proxy`: put the large-result layer in front of any MCP server.

    codepager proxy [options] -- COMMAND [ARGS...]     one stdio backend
    codepager proxy [options] --servers mcp.json       the servers of an mcpServers config

Served over stdio (default) or streamable HTTP like `serve`. Settings come from flags, then
the environment (`CODEPAGER_PROXY__THRESHOLD_TOKENS`, ...), then the `[proxy]` section of the
TOML settings file given with `--config`, as in every other subcommand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from server.cli.serve_cmd import add_transport_arguments, serve_app, server_settings, transport_overrides
from server.settings import ProxySettings, ProxySqlSettings, default_of

EPILOG = """examples:
  codepager proxy -- npx -y @modelcontextprotocol/server-filesystem ~/src
  codepager proxy --threshold-tokens 4000 --exclude-tool read_file -- uvx mcp-server-git
  codepager proxy --servers ~/.config/mcp.json --transport http --port 8766
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "proxy",
        help="run in front of another MCP server, saving its large results as queryable datasets",
        description="Proxy an MCP server: small results pass through untouched, large ones are saved "
        "as datasets the client can query with SQL and page through.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    def default(key: str) -> object:
        return default_of(ProxySettings, key)

    p.add_argument(
        "--servers",
        type=Path,
        metavar="MCP_JSON",
        help="standard mcpServers config; with several servers, tool names are prefixed SERVER_",
    )
    p.add_argument("--name", help="server name of the COMMAND backend (default: derived from the command)")
    p.add_argument(
        "--threshold-tokens",
        type=int,
        help=f"save results estimated above this many tokens (default {default('threshold_tokens')})",
    )
    p.add_argument(
        "--exclude-tool",
        action="append",
        dest="excluded_tools",
        metavar="TOOL",
        help="never intercept this tool's results (repeatable)",
    )
    p.add_argument("--data-dir", type=Path, help=f"where datasets are kept (default {default('data_dir')})")
    p.add_argument(
        "--cleanup-after-days",
        type=float,
        help=f"remove datasets older than this (default {default('cleanup_after_days'):g})",
    )
    proxy_sql = ProxySqlSettings()
    p.add_argument(
        "--duckdb-memory-limit",
        help=f"memory limit of analyze-with-duckdb, proxy.sql.memory_limit (default {proxy_sql.memory_limit})",
    )
    p.add_argument(
        "--duckdb-threads",
        type=int,
        help=f"threads of analyze-with-duckdb, proxy.sql.threads (default {proxy_sql.threads})",
    )
    p.add_argument(
        "--call-timeout",
        type=float,
        dest="call_timeout_s",
        metavar="SECONDS",
        help=f"fail a backend call after this long (default {default('call_timeout_s'):g})",
    )
    p.add_argument(
        "--config", type=Path, metavar="FILE", help="TOML settings file ([proxy], [offload], [server] sections)"
    )
    add_transport_arguments(p)
    p.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]", help="the stdio MCP server to proxy"
    )
    p.set_defaults(func=run)


def proxy_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that were given, as settings overrides (flags win over env and TOML)."""
    keys = ("threshold_tokens", "excluded_tools", "data_dir", "cleanup_after_days", "call_timeout_s")
    sql = {"memory_limit": args.duckdb_memory_limit, "threads": args.duckdb_threads}
    return {"proxy": {**{k: getattr(args, k) for k in keys}, "sql": sql}, "server": transport_overrides(args)}


def backend_command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    return command[1:] if command[:1] == ["--"] else command


def run(args: argparse.Namespace) -> int:
    command = backend_command(args)
    if bool(command) == bool(args.servers):
        print(
            "codepager proxy: give either `-- COMMAND [ARGS...]` or --servers mcp.json (one of them)", file=sys.stderr
        )
        return 2
    settings = server_settings(args.config, proxy_overrides(args))
    if settings is None:
        return 2
    from server.proxy import build_proxy_app, command_backend, config_backends  # heavy imports after validation

    timeout = settings.proxy.call_timeout_s
    try:
        if args.servers:
            backends = config_backends(args.servers, timeout_s=timeout)
        else:
            backends = [command_backend(command, name=args.name, timeout_s=timeout)]
        app = build_proxy_app(settings, backends)
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    return serve_app(app, settings.server)
