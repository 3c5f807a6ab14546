"""`codepager serve`: run the MCP server (stdio by default; streamable HTTP or chunked stdio).

Only MCP goes to stdout; logs go to stderr, because on stdio anything else on stdout would
corrupt the JSON-RPC stream.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from server.cli.home_root import home_root_warnings
from server.settings import ServerSettings, Settings, default_of, load_settings

if TYPE_CHECKING:
    from fastmcp import FastMCP


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the MCP server")
    p.add_argument(
        "--root",
        action="append",
        type=Path,
        dest="roots",
        metavar="DIR",
        help="directory agents may search (repeatable; default: the current directory)",
    )
    add_transport_arguments(p)
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.set_defaults(func=run)


def add_transport_arguments(p: argparse.ArgumentParser) -> None:
    """How an MCP server is served; shared by `serve` and `proxy`."""

    def default(key: str) -> object:
        return default_of(ServerSettings, key)

    p.add_argument("--transport", choices=["stdio", "http", "chunked-stdio"], help=f"default: {default('transport')}")
    p.add_argument("--host", help=f"HTTP bind address (default {default('host')})")
    p.add_argument("--port", type=int, help=f"HTTP port (default {default('port')})")
    p.add_argument(
        "--auth-token",
        help="the token HTTP requests need as 'Authorization: Bearer TOKEN' (default: one generated on first start "
        "and kept in http-token in the user state dir)",
    )
    p.add_argument(
        "--no-auth",
        action="store_const",
        const=True,
        help="serve HTTP without a token (warned about): every local user can then call the tools",
    )
    p.add_argument("--log-level", help=f"stderr log level (default {default('log_level')})")


def transport_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The transport flags that were given, as `server` settings (flags win over TOML and env)."""
    return {
        "transport": args.transport,
        "host": args.host,
        "port": args.port,
        "auth_token": args.auth_token,
        "no_auth": args.no_auth,
        "log_level": args.log_level,
    }


def server_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that were given, as a settings override (flags win over TOML and env)."""
    roots = [r.resolve() for r in args.roots] if args.roots else None
    return {"server": {"roots": roots, **transport_overrides(args)}}


def server_settings(config: Path | None, overrides: dict[str, Any]) -> Settings | None:
    """Settings for a server command, with logging set up; None after saying why they are bad.

    Logs go to stderr: on stdio, anything else on stdout would corrupt the JSON-RPC stream."""
    try:
        settings = load_settings(config, overrides)
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return None
    level = settings.server.log_level
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # fastmcp's loggers have their own stderr handler and do not propagate, so the root level does
    # not reach them; importing fastmcp sets them to its own default, hence after the import.
    # uvicorn's loggers get the level from run_app (server/transports/run.py).
    from fastmcp.utilities.logging import configure_logging

    configure_logging(level)
    return settings


def run(args: argparse.Namespace) -> int:
    settings = server_settings(args.config, server_overrides(args))
    if settings is None:
        return 2
    for warning in home_root_warnings(settings.server.roots, settings.index.cache_dir):
        print(f"codepager: {warning}", file=sys.stderr)
    from server.app import build_app  # heavy imports only once the arguments are known good

    try:
        app = build_app(settings)
    except ValueError as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    if (hint := terminal_hint(settings.server)) is not None:
        print(hint, file=sys.stderr, flush=True)
    return serve_app(app, settings.server)


def serve_app(app: FastMCP[Any], settings: ServerSettings) -> int:
    """Run `app` (the search server or the proxy) on the configured transport, then end the
    process (`end_process`); 2 after saying why when HTTP has no usable token
    (`server.auth_token`)."""
    from server.auth_token import bearer_token, how_to_connect
    from server.transports.run import run_app

    try:
        token = bearer_token(settings)
    except ValueError as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    if token is not None:
        print(how_to_connect(settings, app.name, token), file=sys.stderr, flush=True)
    try:
        run_app(app, settings, token.value if token is not None else None)
    except KeyboardInterrupt:
        end_process(130)
    end_process(0)


def end_process(status: int) -> NoReturn:
    """End the server once its transport has closed (stdin at EOF, HTTP stopped), without
    finalizing the interpreter: flush what is written, then `os._exit`.

    Finalizing is unsafe while a daemon thread runs native code, and one usually does: the
    background indexer loading the model (safetensors) or embedding (tokenizers), a freshness
    check, a search still in a worker thread. CPython makes such a thread `pthread_exit` when it
    next takes the GIL after finalization has begun (python/cpython#87135); the forced unwind
    runs into a PyO3 extension's `catch_unwind`, and glibc aborts the process with "FATAL:
    exception not rethrown" (SIGABRT, a core file; seen in 2 of 12 starts with stdin at EOF).
    Finalizing also joins the chunking pool's manager thread (concurrent.futures' exit hook),
    which waits for batches in flight: exits took over 10 s. Nothing is lost by skipping it:
    every answer is flushed, an index build stopped midway leaves only a temporary directory
    the next build sweeps (`search_engine.index.store`), and chunking workers end themselves
    when this process does (`search_engine.chunking.workers`)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed file
            stream.flush()
    logging.shutdown()
    os._exit(status)


def terminal_hint(server: ServerSettings) -> str | None:
    """One line for a person who started a stdio server in a terminal, where it would otherwise
    sit silent, waiting for JSON-RPC that never comes: what it waits for and how a client runs
    it. None when stdin is not a terminal (a client started it) or the transport is HTTP."""
    if server.transport == "http" or not sys.stdin.isatty():
        return None
    roots = " ".join(f"--root {shlex.quote(str(r))}" for r in server.roots)
    return (
        f"codepager: MCP server ({server.transport}) waiting for a client on stdin; Ctrl-C to stop. "
        f"An MCP client starts it itself, e.g.: claude mcp add codepager -- codepager serve {roots}"
    )
