"""`codepager proxy`: put the large-result layer in front of any MCP server.

    codepager proxy [options] -- COMMAND [ARGS...]     one stdio backend
    codepager proxy [options] --config mcp.json        the servers of an mcpServers config

Served over stdio (default) or streamable HTTP like `serve`. Settings come from flags, then
the environment (`CODEPAGER_PROXY__THRESHOLD_TOKENS`, ...), then the `[proxy]` section of the
TOML file given with `--settings` (`--config` is the MCP config, as in other MCP tools).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from server.cli.serve_cmd import add_transport_arguments, server_settings, transport_overrides

EPILOG = """examples:
  codepager proxy -- npx -y @modelcontextprotocol/server-filesystem ~/src
  codepager proxy --threshold-tokens 4000 --exclude-tool read_file -- uvx mcp-server-git
  codepager proxy --config ~/.config/mcp.json --transport http --port 8766
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "proxy",
        help="run in front of another MCP server, saving its large results as queryable datasets",
        description="Proxy an MCP server: small results pass through untouched, large ones are saved "
        "as datasets the client can query with SQL and page through.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=Path, dest="mcp_config", metavar="MCP_JSON",
                   help="standard mcpServers config; with several servers, tool names are prefixed SERVER_")
    p.add_argument("--name", help="server name of the COMMAND backend (default: derived from the command)")
    p.add_argument("--threshold-tokens", type=int, help="save results estimated above this many tokens (default 8192)")
    p.add_argument("--exclude-tool", action="append", dest="excluded_tools", metavar="TOOL",
                   help="never intercept this tool's results (repeatable)")
    p.add_argument("--data-dir", type=Path, help="where datasets are kept (default: the user data dir)")
    p.add_argument("--cleanup-after-days", type=float, help="remove datasets older than this (default 30)")
    p.add_argument("--schema-sample-size", type=int, help="records sampled to infer field types (default 100)")
    p.add_argument("--duckdb-memory-limit", help="memory limit of analyze-with-duckdb (default 1GB)")
    p.add_argument("--duckdb-threads", type=int, help="threads of analyze-with-duckdb (default 2)")
    p.add_argument("--call-timeout", type=float, dest="call_timeout_s", metavar="SECONDS",
                   help="fail a backend call after this long (default 300)")
    p.add_argument("--settings", type=Path, help="TOML settings file ([proxy], [offload], [server] sections)")
    add_transport_arguments(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]",
                   help="the stdio MCP server to proxy")
    p.set_defaults(func=run)


def proxy_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that were given, as settings overrides (flags win over env and TOML)."""
    keys = ("threshold_tokens", "excluded_tools", "data_dir", "cleanup_after_days", "schema_sample_size",
            "duckdb_memory_limit", "duckdb_threads", "call_timeout_s")
    return {"proxy": {k: getattr(args, k) for k in keys}, "server": transport_overrides(args)}


def backend_command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    return command[1:] if command[:1] == ["--"] else command


def run(args: argparse.Namespace) -> int:
    command = backend_command(args)
    if bool(command) == bool(args.mcp_config):
        print("codepager proxy: give either `-- COMMAND [ARGS...]` or --config mcp.json (one of them)", file=sys.stderr)
        return 2
    settings = server_settings(args.settings, proxy_overrides(args))
    if settings is None:
        return 2
    from server.proxy import build_proxy_app, command_backend, config_backends  # heavy imports after validation

    timeout, largest = settings.proxy.call_timeout_s, settings.proxy.max_backend_message_bytes
    try:
        if args.mcp_config:
            backends = config_backends(args.mcp_config, timeout_s=timeout, max_message_bytes=largest)
        else:
            backends = [command_backend(command, name=args.name, timeout_s=timeout, max_message_bytes=largest)]
        app = build_proxy_app(settings, backends)
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    from server.transports.run import run_app

    run_app(app, settings.server)
    return 0
