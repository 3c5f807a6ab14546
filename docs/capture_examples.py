"""Capture real responses of every codepager MCP tool for docs/tools.md.

Builds the real server (`server.app.build_app`) over a small sample repository, talks to it
with a fastmcp `Client` in memory, and keeps what came back, trimmed for reading: long lists
show their first items and say how many were left out, long strings are clipped, and the
temporary directories are shown as `/home/me/toolkit` (the root), `/run/user/1000/codepager` (the
offload folder) and `/home/me/.cache/codepager`. Nothing else is edited: every example is a
real answer of the current code.

    .venv/bin/python docs/capture_examples.py                 # print the examples as markdown
    .venv/bin/python docs/capture_examples.py --write docs/tools.md

With --write, the fenced block after each `<!-- capture:NAME -->` marker in the file is
replaced by the example NAME. `tests/test_docs.py` checks that the examples in docs/tools.md
still have the shape the server answers with.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fastmcp import Client, FastMCP  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp_types import Implementation  # noqa: E402

from harness.protocol_clients import client_at  # noqa: E402
from server.app import build_app, build_services  # noqa: E402
from server.errors import REFUSALS, TOOL_ERRORS  # noqa: E402
from server.settings import Settings, load_settings  # noqa: E402
from server.tools.dataset_pages import register_dataset_page_tool  # noqa: E402
from server.tools.page_args import SHARED  # noqa: E402
from sessions import CursorCodec  # noqa: E402

SAMPLE: dict[str, str] = {
    "net/client.py": '''\
class ClientSession:
    """Keeps a pool of open HTTP connections and reuses them between requests."""

    def __init__(self, pool_size=10):
        self.pool_size = pool_size
        self.idle = []

    def close(self):
        """Drop the idle connections."""
        self.idle.clear()
''',
    "net/retry.py": '''\
import random
import time


def retry_with_backoff(call, tries=4, first_pause=0.2):
    """Run call(); after each failure wait twice as long as before (plus jitter), then retry."""
    pause = first_pause
    for attempt in range(1, tries + 1):
        try:
            return call()
        except OSError:
            if attempt == tries:
                raise
            time.sleep(pause + random.random() * pause / 10)
            pause *= 2
''',
    "web/cookies.py": '''\
def parse_cookie_header(header):
    """Turn a request's Cookie header ("a=1; b=2") into {"a": "1", "b": "2"}."""
    jar = {}
    for pair in header.split(";"):
        key, sep, val = pair.strip().partition("=")
        if sep:
            jar[key] = val
    return jar


def format_cookie(name, value, max_age=None):
    """One Set-Cookie header value."""
    text = f"{name}={value}"
    if max_age is not None:
        text += f"; Max-Age={max_age}"
    return text
''',
    "README.md": "# toolkit\n\nA tiny HTTP toolkit: sessions, retries and cookies.\n",
}

SHOWN_ROOT = "/home/me/toolkit"
SHOWN_OFFLOAD = "/run/user/1000/codepager"
SHOWN_CACHE = "/home/me/.cache/codepager"
LIST_ITEMS = 2
STRING_CHARS = 160
CURSOR_CHARS = 24
#: Strings shown whole: what an agent is told to do is the point of the example.
WHOLE_STRINGS = {"message", "hint", "guidance", "description"}


def write_sample(root: Path) -> None:
    for rel, text in SAMPLE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


# -- trimming ---------------------------------------------------------------------------------


def trim(value: Any, key: str = "", items: int = LIST_ITEMS) -> Any:
    """A shorter copy of a response for reading: lists cut to their first `items` (with a note
    saying how many were left out), long strings and cursors clipped with an ellipsis."""
    if isinstance(value, dict):
        return {k: trim(v, k, items) for k, v in value.items()}
    if isinstance(value, list):
        kept = [trim(v, "", items) for v in value[:items]]
        if len(value) > items:
            kept.append(f"… {len(value) - items} more")
        return kept
    if isinstance(value, str):
        if key in WHOLE_STRINGS:
            return value
        if key in ("next_cursor", "cursor") and len(value) > CURSOR_CHARS:
            return value[: CURSOR_CHARS // 2] + "…" + value[-CURSOR_CHARS // 2 :]
        return value if len(value) <= STRING_CHARS else value[:STRING_CHARS] + "…"
    return value


def trim_jsonl(text: str) -> list[Any]:
    """A JSONL text as its trimmed records (one per line)."""
    return [trim(json.loads(line), items=10) for line in text.splitlines() if line.strip()]


def is_trim_note(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"… \d+ more", value) is not None


class Shower:
    """Replaces the run's temporary directories with the stable names the docs show."""

    def __init__(self, root: Path, offload: Path, cache: Path) -> None:
        self.pairs = [(str(root), SHOWN_ROOT), (str(offload), SHOWN_OFFLOAD), (str(cache), SHOWN_CACHE)]

    def __call__(self, value: Any) -> Any:
        text = json.dumps(value, ensure_ascii=False)
        for real, shown in self.pairs:
            text = text.replace(json.dumps(real)[1:-1], shown)
        return json.loads(text)


# -- capturing --------------------------------------------------------------------------------


def body(result: Any) -> Any:
    """structuredContent, or the text block's JSON when there is none."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def shown_text(text: str) -> str:
    """A text block as the docs show it: fenced, the next cursor clipped like JSON cursors."""
    half = CURSOR_CHARS // 2
    text = re.sub(rf"next_cursor=(\S{{{half}}})\S+(\S{{{half}}})", r"next_cursor=\1…\2", text)
    return f"```text\n{text.rstrip()}\n```"


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    """The tool's answer; a JSON-RPC error becomes {"jsonrpc_error": {code, message, data}}."""
    try:
        result = await client.call_tool(tool, args, raise_on_error=False)
    except MCPError as exc:
        error = {"code": exc.error.code, "message": exc.error.message}
        if exc.error.data is not None:
            error["data"] = exc.error.data
        return {"jsonrpc_error": error}
    answer = body(result)
    if result.is_error:
        return {"isError": True, **answer}
    return answer


#: Tools whose parameter tables docs/tools.md shows.
DOCUMENTED_TOOLS = (
    "regex_search", "hybrid_search", "index_status", "reindex", "analyze-with-duckdb", "list-saved-datasets",
)  # fmt: skip
#: The parameters every search tool shares, shown once in their own table.
SHARED_OPTIONS = SHARED


async def proxy_tool_schemas(settings: Settings) -> dict[str, dict[str, Any]]:
    """Input schemas of the tool only `codepager proxy` adds (read-dataset-page), registered
    on an app of its own so no backend server is needed."""
    services = build_services(settings)
    app = FastMCP("proxy-tools")
    register_dataset_page_tool(
        app,
        services.datasets,
        CursorCodec("docs-example-secret-key"),
        services.layer,
        max_output_tokens=settings.proxy.threshold_tokens,
    )
    async with Client(app) as c:
        return {t.name: t.input_schema for t in await c.list_tools()}


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    kind = schema.get("type", "any")
    if kind == "array":
        return f"{_type(schema.get('items', {}))}[]"
    if kind == "object" and "properties" in schema:
        return "object {" + ", ".join(schema["properties"]) + "}"
    return str(kind)


def _limits(schema: dict[str, Any]) -> str:
    for option in schema.get("anyOf", [schema]):
        low, high = option.get("minimum"), option.get("maximum")
        if low is not None and high is not None:
            return f"{low} – {high}"
        if low is not None or high is not None:
            return f"≥ {low}" if low is not None else f"≤ {high}"
        if "pattern" in option:
            return " / ".join(f"`{c}`" for c in re.sub(r"^\^\(|\)\$$", "", option["pattern"]).split("|"))
        if "enum" in option:
            return " / ".join(f"`{c}`" for c in option["enum"])
    return ""


def params_table(schema: dict[str, Any]) -> str:
    """The parameters of a tool's input schema as a markdown table."""
    required = set(schema.get("required", ()))
    rows = ["| parameter | type | default | limits | description |", "|---|---|---|---|---|"]
    for name, prop in schema["properties"].items():
        if name in required:
            default = "required"
        elif prop.get("default") is None:
            default = "–"
        else:
            default = f"`{json.dumps(prop['default'])}`"
        description = (prop.get("description") or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)} | {default} | {_limits(prop)} | {description} |")
    return "\n".join(rows)


#: When each isError code happens, in words; `error_codes_table` fails on a code missing here.
ERROR_CASES: dict[str, str] = {
    "session_store_unavailable": "the shared session store (Redis) did not answer",
    "invalid_query": (
        "the regex does not compile, or the pattern/query is too long or unusable (`position` points at the problem)"
    ),
    "invalid_path": "`path` does not exist, is not searchable, or is outside the roots",
    "timeout": "the search ran longer than `search.timeout_s`",
    "index_not_ready": (
        "semantic/hybrid search waited `index.ready_wait_s` and the index is still building (`progress` says how far)"
    ),
    "model_unavailable": "the embedding model cannot be loaded (it is never downloaded)",
    "index_damaged": "the index on disk is damaged (cut short, emptied) and a rebuild did not repair it",
    "cache_dir_refused": (
        "`index.cache_dir` belongs to another user, or others can write in it and it cannot be made private "
        "(a shared sticky dir such as `/tmp`): codepager will not trust an index or key found there"
    ),
    "index_unavailable": "the index on disk cannot be read or written",
    "jq_timeout": (
        "`jq_filter` ran past `jq.timeout_s`, or waited that long for a worker (the server busy with other filters)"
    ),
    "invalid_jq_filter": (
        "`jq_filter` was refused (reads the environment or files, holds a NUL), does not compile, fails, "
        "or does not keep match records as they are (the message shows one)"
    ),
    "sql_rejected": "not exactly one read-only statement",
    "sql_timeout": (
        "the SQL ran past `sql.timeout_s`, or waited that long for its turn (the server busy with other queries)"
    ),
    "sql_result_too_large": "with `output_mode=legacy`, the result is larger than one answer",
    "sql_failed": "the SQL was accepted but failed (unknown table or column, type error, memory)",
    "invalid_dataset_id": "`dataset_id` is not a 26-character id",
    "dataset_not_found": "no saved dataset has this id (expired or removed)",
    "search_failed": "any other search failure (e.g. ripgrep missing or failing)",
    "backend_result_invalid": "proxy: a backend answered a call with something that is not an MCP tool result",
}


#: When each refusal code is given, in words; `refusal_codes_table` fails on a code missing here.
REFUSAL_CASES: dict[str, str] = {
    "invalid_arguments": "an argument of the wrong type, out of its limits or unknown; no pattern/query and no cursor",
    "invalid_cursor": "a cursor edited, truncated, sealed with another key, from a server rooted elsewhere, for "
    "another tool, or whose folder is gone",
    "cursor_expired": "a cursor older than `sessions.cursor_max_age_s` (1 h)",
    "cursor_mismatch": "a search parameter sent with a cursor that differs from its search",
    "results_changed": "the files or the index changed since page 1, so the list cannot be restored",
    "search_too_large": "a search whose parameters are too large for a cursor to carry (over 1 MiB)",
}


def refusal_codes_table() -> str:
    """The refusal codes of `server.errors` and their hints, as a markdown table."""
    rows = ["| `code` | when | `hint` (what to do) |", "|---|---|---|"]
    rows += [f"| `{code}` | {REFUSAL_CASES[code]} | {hint} |" for code, hint in REFUSALS.items()]
    return "\n".join(rows)


def error_codes_table() -> str:
    """The isError codes of `server.errors` (the mapped engine and session errors first), as a markdown table."""
    rows = ["| `error.code` | when | `error.hint` (what to do) |", "|---|---|---|"]
    for code, hint in TOOL_ERRORS.items():
        shown = hint.replace("<", "&lt;").replace(">", "&gt;")  # not an HTML tag in a table
        rows.append(f"| `{code}` | {ERROR_CASES[code]} | {shown} |")
    return "\n".join(rows)


def tamper(cursor: str) -> str:
    middle = len(cursor) // 2
    return cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]


async def capture(root: Path, work: Path, cache: Path) -> dict[str, Any]:
    """Every example, keyed by the marker name docs/tools.md uses, untrimmed."""
    settings = load_settings(
        None,
        {
            "server": {"roots": [root]},
            "index": {"cache_dir": cache, "ready_wait_s": 120},
            "sessions": {"secret_key": "docs-example-secret-key"},
            "offload": {"output_dir": work / "offload"},
        },
    )
    out: dict[str, Any] = {"error_codes": error_codes_table(), "refusal_codes": refusal_codes_table()}
    app = build_app(settings)
    async with Client(app) as c:
        tools = {t.name: t for t in await c.list_tools()}
        regex_tool = tools["regex_search"]
        assert regex_tool.annotations is not None
        out["tools_list"] = {
            "tools": list(tools),
            "regex_search": {
                "annotations": regex_tool.annotations.model_dump(exclude_none=True, by_alias=True),
                "_meta": regex_tool.meta,
            },
        }
        for name in DOCUMENTED_TOOLS:
            schema = tools[name].input_schema
            own = {k: v for k, v in schema["properties"].items() if k not in SHARED_OPTIONS}
            out[f"params_{name}"] = params_table({**schema, "properties": own})
        for name, schema in (await proxy_tool_schemas(settings)).items():
            out[f"params_{name}"] = params_table(schema)
        shared = tools["regex_search"].input_schema["properties"]
        out["params_shared_options"] = params_table({"properties": {k: shared[k] for k in SHARED_OPTIONS}})
        first = await call(c, "regex_search", {"pattern": r"def \w+", "page_size": 3})
        out["regex_page_1"] = first
        cursor = first["pagination"]["next_cursor"]
        out["regex_page_2"] = await call(c, "regex_search", {"cursor": cursor})
        out["regex_context"] = await call(
            c, "regex_search", {"pattern": r"def \w+", "page_size": 2, "context_lines": 1}
        )
        out["regex_full"] = await call(
            c, "regex_search", {"pattern": r"def \w+", "page_size": 2, "context_lines": 1, "detail": "full"}
        )
        for client_name, key in (("cursor-vscode", "text_for_text_clients"), ("claude-code", "text_for_claude_code")):
            async with Client(app, client_info=Implementation(name=client_name, version="1.0")) as named:
                result = await named.call_tool("regex_search", {"pattern": r"def \w+", "page_size": 3})
            out[key] = shown_text(result.content[0].text)
        out["regex_cut"] = await call(
            c, "regex_search", {"pattern": r"def \w+", "context_lines": 3, "max_output_tokens": 350}
        )
        out["regex_stats_only"] = await call(c, "regex_search", {"pattern": r"def \w+", "stats": "only"})
        legacy = await c.call_tool(
            "regex_search",
            {"pattern": "cookie", "ignore_case": True, "output_mode": "legacy", "snippet_length": 0},
        )
        out["regex_legacy"] = json.loads(legacy.content[0].text)
        out["regex_file_ref"] = await call(c, "regex_search", {"pattern": r"def \w+", "output_mode": "file_ref"})
        file_id = out["regex_file_ref"]["results"]["file_ref"]["id"]
        lines = await c.read_resource(f"codepager://results/{file_id}/lines/1-2")
        out["resource_lines"] = "".join(getattr(part, "text", "") for part in lines)
        out["semantic_search"] = await call(
            c, "hybrid_search", {"query": "wait longer after each failure", "mode": "semantic", "top_k": 2}
        )
        out["hybrid_search"] = await call(
            c, "hybrid_search", {"query": "parse cookies from a request header", "top_k": 2}
        )
        out["index_status"] = await call(c, "index_status", {})
        out["reindex"] = await call(c, "reindex", {"full": False})
        sql = "SELECT path, count(*) AS n, min(line) AS first FROM dataset GROUP BY path ORDER BY n DESC"
        out["sql"] = await call(c, "analyze-with-duckdb", {"query": sql, "dataset_id": file_id})
        out["list_datasets"] = await call(c, "list-saved-datasets", {})
        async with client_at(app, "2025-06-18") as older:
            out["error_tampered_cursor"] = await call(older, "regex_search", {"cursor": tamper(cursor)})
        out["error_bad_argument"] = await call(c, "regex_search", {"query": r"def \w+"})
        out["error_invalid_regex"] = await call(c, "regex_search", {"pattern": "def (unclosed"})
        out["error_path_outside"] = await call(c, "regex_search", {"pattern": "x", "path": "/etc"})
        out["error_sql_rejected"] = await call(c, "analyze-with-duckdb", {"query": "DROP TABLE x"})
    return out


def run_capture(cache: Path | None = None) -> dict[str, Any]:
    """Capture in a temporary sample repository; examples trimmed and shown with stable paths."""
    with tempfile.TemporaryDirectory(prefix="codepager-docs-") as tmp:
        work = Path(tmp).resolve()
        root = work / "toolkit"
        write_sample(root)
        if cache is None:
            cache = work / "cache"
        raw = asyncio.run(capture(root, work, cache))
        show = Shower(root, work / "offload", cache)
        examples = {}
        for name, value in raw.items():
            if name.startswith(("params_", "text_")) or name in ("error_codes", "refusal_codes"):
                examples[name] = value
            elif name == "resource_lines":
                examples[name] = show(trim_jsonl(value))
            else:
                examples[name] = show(trim(value, items=len(value["tools"]) if name == "tools_list" else LIST_ITEMS))
        return examples


# -- the markdown -----------------------------------------------------------------------------

MARKER = re.compile(r"<!-- capture:(?P<name>[a-z0-9_-]+) -->\n(?P<body>.*?)<!-- /capture -->", re.S)


#: Examples shown as JSON Lines (one compact record per line) rather than indented JSON.
JSONL_EXAMPLES = {"resource_lines"}


def compact_json(value: Any, indent: int = 0, width: int = 96) -> str:
    """Indented JSON whose small objects and lists stay on one line, so examples read short."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {compact_json(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{compact_json(v, indent + 2, width)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def render(name: str, value: Any) -> str:
    """The markdown of one example: a table as it is, JSON in a fenced block."""
    if isinstance(value, str):
        return value
    if name in JSONL_EXAMPLES:
        lines = "\n".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in value)
        return f"```jsonl\n{lines}\n```"
    return f"```json\n{compact_json(value)}\n```"


def marked(name: str, value: Any) -> str:
    return f"<!-- capture:{name} -->\n{render(name, value)}\n<!-- /capture -->"


def blocks_in(text: str) -> dict[str, str]:
    """The captured blocks of a markdown file: name -> markdown between the markers."""
    return {m["name"]: m["body"].rstrip("\n") for m in MARKER.finditer(text)}


def write_into(path: Path, examples: dict[str, Any]) -> list[str]:
    """Replace each marked block of `path` by its example; returns the markers without one."""
    text = path.read_text(encoding="utf-8")
    missing: list[str] = []

    def replace(m: re.Match[str]) -> str:
        if m["name"] not in examples:
            missing.append(m["name"])
            return m.group(0)
        return marked(m["name"], examples[m["name"]])

    path.write_text(MARKER.sub(replace, text), encoding="utf-8")
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", type=Path, metavar="MD", help="update the marked blocks of this file in place")
    parser.add_argument("--cache", type=Path, help="index cache dir (default: a temporary one)")
    args = parser.parse_args()
    examples = run_capture(args.cache)
    if args.write:
        missing = write_into(args.write, examples)
        if missing:
            print(f"no example for markers: {', '.join(missing)}", file=sys.stderr)
            return 1
        return 0
    for name, value in examples.items():
        print(marked(name, value) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
