"""The docs say what the code does: generated parts match their generators, captured examples
have the shape the server answers with today, and every link points somewhere real."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from server.errors import TOOL_ERRORS
from server.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def load_script(name: str) -> ModuleType:
    """A docs/ script as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# -- configuration.md ---------------------------------------------------------------------------


def test_configuration_page_is_what_the_settings_models_generate():
    gen = load_script("gen_configuration")
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == gen.render(), (
        "docs/configuration.md is stale: run .venv/bin/python docs/gen_configuration.py --write"
    )


def test_every_setting_has_a_row():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    settings = load_settings()
    for section in type(settings).model_fields:
        for key in type(getattr(settings, section)).model_fields:
            assert f"| `{key}` | `CODEPAGER_{section.upper()}__{key.upper()}` |" in text


def test_configuration_toml_example_loads_and_applies(tmp_path):
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    config = tmp_path / "codepager.toml"
    config.write_text(block, encoding="utf-8")
    settings = load_settings(config)
    assert settings.server.roots == [Path("/src/project")]
    assert settings.search.default_page_size == 100
    assert settings.sessions.backend.startswith("redis://")
    assert settings.offload.max_tokens == 10000
    assert settings.sql.memory_limit == "1GB" and settings.proxy_sql().threads == 4
    assert settings.proxy_sql().memory_limit == "1GB" and settings.proxy_sql().timeout_s == settings.sql.timeout_s


# -- tools.md -----------------------------------------------------------------------------------


def shape(value: Any) -> Any:
    """What a response looks like without its values: keys, list lengths, leaf types."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "str"


def block_value(block: str) -> Any:
    """The JSON (or JSON Lines) inside one captured fenced block."""
    match = re.fullmatch(r"```(\w+)\n(.*)\n```", block, re.S)
    assert match, f"not a fenced block: {block[:80]!r}"
    if match[1] == "jsonl":
        return [json.loads(line) for line in match[2].splitlines()]
    return json.loads(match[2])


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    capture = load_script("capture_examples")
    cache = tmp_path_factory.mktemp("docs-cache")
    examples: dict[str, Any] = capture.run_capture(cache)
    return examples


@pytest.fixture(scope="module")
def documented() -> dict[str, str]:
    capture = load_script("capture_examples")
    blocks: dict[str, str] = capture.blocks_in((DOCS / "tools.md").read_text(encoding="utf-8"))
    return blocks


def test_every_captured_example_is_in_tools_md_and_nothing_else(captured, documented):
    assert set(documented) == set(captured), "run .venv/bin/python docs/capture_examples.py --write docs/tools.md"


def test_parameter_and_error_tables_are_exactly_what_the_server_declares(captured, documented):
    tables = [name for name in captured if name.startswith("params_") or name in ("error_codes", "refusal_codes")]
    assert len(tables) >= 9
    for name in tables:
        assert documented[name] == captured[name], (
            f"{name} is stale: run docs/capture_examples.py --write docs/tools.md"
        )


def test_examples_have_the_shape_of_live_answers(captured, documented):
    for name, value in captured.items():
        if isinstance(value, str):
            continue
        shown = block_value(documented[name])
        assert shape(shown) == shape(value), f"{name} changed shape: run docs/capture_examples.py --write docs/tools.md"


def test_examples_show_the_behaviour_the_prose_describes(captured):
    page1, page2 = captured["regex_page_1"], captured["regex_page_2"]
    assert (page1["metadata"]["cache"], page2["metadata"]["cache"]) == ("miss", "hit")
    assert page2["pagination"]["current_page"] == 2
    assert captured["regex_cut"]["results"]["truncated"] is True
    assert captured["regex_cut"]["pagination"]["next_cursor"] is not None
    assert captured["regex_file_ref"]["results"]["mode"] == "file_ref"
    assert captured["error_tampered_cursor"]["jsonrpc_error"]["code"] == -32602
    assert captured["error_bad_argument"]["isError"] and captured["error_bad_argument"]["error"]["code"] == (
        "invalid_arguments"
    )
    codes = {captured[n]["error"]["code"] for n in ("error_invalid_regex", "error_path_outside", "error_sql_rejected")}
    assert codes == {"invalid_query", "invalid_path", "sql_rejected"}


def test_every_tool_has_a_section_and_every_error_code_a_row(captured):
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    headings = "\n".join(line for line in text.splitlines() if line.startswith("## "))
    for tool in captured["tools_list"]["tools"]:
        assert tool in headings, f"docs/tools.md has no section for {tool}"
    for code in TOOL_ERRORS:
        assert f"| `{code}` |" in text


# -- links --------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m[1]) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file) if file else page
        assert resolved.exists(), f"{page.name}: link to missing {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading #{anchor} in {resolved.name}"
