"""Helpers for the MCP server tests: settings for a tmp tree, and walking pages to the end."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.commands import codepager_cmd
from harness.patched import patched_codepager_cmd
from server.records import records_of_groups
from server.settings import Settings, load_settings

SECRET = "test-secret-key"


def make_settings(root: Path, tmp: Path, **sections: dict[str, Any]) -> Settings:
    overrides: dict[str, Any] = {
        "server": {"roots": [root]},
        # Regex tests must not pay for a background model load; semantic tests turn it on.
        "index": {"cache_dir": tmp / "cache", "index_on_start": False},
        "sessions": {"secret_key": SECRET},
        "offload": {"output_dir": tmp / "offload"},
    }
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_settings(None, overrides)


def structured(result: Any) -> dict[str, Any]:
    """The structuredContent, after checking the text block: the same JSON, or for a search page
    the grep-like text whose header gives the counts and the next cursor."""
    body: dict[str, Any] | None = result.structured_content
    assert body is not None
    text = result.content[0].text
    try:
        assert json.loads(text) == body
    except json.JSONDecodeError:
        results, cursor = body["results"], body["pagination"]["next_cursor"]
        head = text.splitlines()[0]
        assert f"{results['count']} of {results['total_count']} matches" in head, head
        more = (f"next_cursor={cursor}", "more: pagination.next_cursor") if cursor else ("last page",)
        assert any(m in head for m in more), head
    return body


async def walk(
    client: Client[Any], tool: str, args: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Call `tool`, then follow next_cursor to the end. Returns (all matches, every response)."""
    responses = [structured(await client.call_tool(tool, args))]
    while (cursor := responses[-1]["pagination"]["next_cursor"]) is not None:
        responses.append(structured(await client.call_tool(tool, {"cursor": cursor})))
    matches = [m for r in responses for m in page_matches(r)]
    return matches, responses


def page_matches(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A page's match records, inline or read back from its offloaded JSONL file (after the
    header): compact records (`{"path", "line", "text", ...}`) for a compact page, the full
    objects for a `detail="full"` page."""
    results = response["results"]
    if results["mode"] == "file_ref":
        lines = Path(results["file_ref"]["path"]).read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines[1:]]
    if "files" in results:
        return records_of_groups(results["files"])
    matches: list[dict[str, Any]] = results["matches"]
    return matches


def serve_env(tmp: Path, secret: str | None = SECRET, **settings: str) -> dict[str, str]:
    """Environment for a `codepager serve` subprocess: the test's cache, key, offload dir and
    state dir, which holds the HTTP token file (none of them the user's own).

    `secret=None` configures no key (the server keeps its own in the cache dir); `settings`
    are more overrides, `sessions__ttl_s="1"` -> CODEPAGER_SESSIONS__TTL_S=1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEPAGER_")}
    env.update(
        {
            "CODEPAGER_INDEX__CACHE_DIR": str(tmp / "cache"),
            "CODEPAGER_INDEX__INDEX_ON_START": "false",
            "CODEPAGER_OFFLOAD__OUTPUT_DIR": str(tmp / "offload"),
            "XDG_STATE_HOME": str(tmp / "state"),  # the HTTP token file: tmp/state/codepager/http-token
            "HF_HUB_OFFLINE": "1",
        }
    )
    if secret is not None:
        env["CODEPAGER_SESSIONS__SECRET_KEY"] = secret
    env.update({f"CODEPAGER_{name.upper()}": value for name, value in settings.items()})
    return env


def pid_with_args(*args: str) -> int:
    """The running process whose command line holds every one of `args` (e.g. `serve` and the
    test's own tmp path): how a test finds a server that a fastmcp transport started."""
    wanted = [os.fsencode(a) for a in args]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if all(w in argv for w in wanted):
                return int(entry.name)
    raise AssertionError(f"no process running with {args}")


def _status_kib(pid: int, field: str) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


def reset_peak_rss(pid: int) -> int:
    """Reset the process's peak RSS (VmHWM) to its RSS now, and return that RSS in bytes."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss(pid: int) -> int:
    """The process's peak RSS (VmHWM) in bytes since it started or `reset_peak_rss`."""
    return _status_kib(pid, "VmHWM") * 1024


def stdio_client(
    root: Path,
    tmp: Path,
    env: dict[str, str] | None = None,
    *,
    log_file: Path | None = None,
    constants: dict[str, Any] | None = None,
) -> Client[Any]:
    """A client of a real `codepager serve --root ROOT` subprocess over stdio (its stderr to
    `log_file` when given), with the module `constants` set (`harness.patched`) when given."""
    cmd, args = patched_codepager_cmd(constants) if constants else codepager_cmd()
    env = env if env is not None else serve_env(tmp)
    transport = StdioTransport(cmd, [*args, "serve", "--root", str(root)], env=env, cwd=str(root), log_file=log_file)
    return Client(transport, timeout=120)


def cli_full_list(root: Path, pattern: str) -> list[tuple[str, int]]:
    """Every (path, line) that `codepager search --jsonl` finds under `root`: what a paged walk
    must equal."""
    cmd, args = codepager_cmd()
    out = subprocess.run(
        [cmd, *args, "search", "--jsonl", pattern], cwd=root, capture_output=True, text=True, check=True
    )
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    return [(r["path"], r["line"]) for r in rows]


def run_config(tmp_path: Path, toml: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`codepager config` over a settings file `toml` and the variables `env` (no others)."""
    config = tmp_path / "codepager.toml"
    config.write_text(toml)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CODEPAGER_")}
    cmd, args = codepager_cmd()
    return subprocess.run(
        [cmd, *args, "config", "--config", str(config)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )
