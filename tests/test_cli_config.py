"""`codepager config`: the effective settings, in the documented order of precedence, with
secrets masked (the output gets pasted into bug reports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from server.app import build_app
from tests.server_helpers import make_settings, run_config

CODEPAGER = Path(sys.executable).parent / "codepager"


def effective(tmp_path: Path, toml: str, **env: str) -> dict[str, Any]:
    done = run_config(tmp_path, toml, **env)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


@pytest.mark.slow
def test_environment_beats_toml_which_beats_defaults(tmp_path: Path) -> None:
    toml = "[search]\nmax_results = 500\ndefault_page_size = 25\n[sessions]\nttl_s = 60\n"
    settings = effective(tmp_path, toml, CODEPAGER_SEARCH__MAX_RESULTS="700")
    assert settings["search"]["max_results"] == 700  # env over TOML
    assert settings["search"]["default_page_size"] == 25 and settings["sessions"]["ttl_s"] == 60  # TOML over defaults
    assert settings["search"]["timeout_s"] == 30 and settings["offload"]["max_tokens"] == 20_000  # defaults
    assert settings["sql"]["max_rows"] == 100_000 and settings["jq"]["timeout_s"] == 5  # defaults


@pytest.mark.slow
def test_secrets_are_masked(tmp_path: Path) -> None:
    toml = '[sessions]\nsecret_key = "a-very-long-secret-signing-key"\nbackend = "redis://:hunter2@localhost:6379/0"\n'
    out = effective(tmp_path, toml, CODEPAGER_SERVER__AUTH_TOKEN="bearer-token-value")
    assert out["sessions"]["secret_key"] == "***" and out["server"]["auth_token"] == "***"
    assert out["sessions"]["backend"] == "redis://:***@localhost:6379/0"
    text = json.dumps(out)
    assert "a-very-long-secret" not in text and "hunter2" not in text and "bearer-token-value" not in text
    unset = effective(tmp_path, "")
    assert unset["sessions"]["secret_key"] is None and unset["server"]["auth_token"] is None


def test_an_empty_configured_secret_key_is_refused(code_tree: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="secret_key is empty"):
        build_app(make_settings(code_tree, tmp_path, sessions={"secret_key": "  "}))


@pytest.mark.slow
@pytest.mark.parametrize("source", ["toml", "env"])
def test_a_misspelt_key_is_an_error_naming_it(tmp_path: Path, source: str) -> None:
    config = tmp_path / "codepager.toml"
    config.write_text("[search]\nmax_resultz = 5\n" if source == "toml" else "")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEPAGER_")}
    if source == "env":
        env["CODEPAGER_SEARCH__MAX_RESULTZ"] = "5"
    done = subprocess.run(
        [str(CODEPAGER), "config", "--config", str(config)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "search.max_resultz" in done.stderr and "not permitted" in done.stderr


def refused(tmp_path: Path, toml: str, **env: str) -> str:
    """stderr of `codepager config` over settings (a file, and `env`) it must refuse (exit 2,
    nothing on stdout)."""
    done = run_config(tmp_path, toml, **env)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    return done.stderr


def test_a_file_that_is_not_toml_is_named_with_the_parser_error(tmp_path: Path) -> None:
    err = refused(tmp_path, "[search]\nmax_results = [\n")
    assert f"{tmp_path / 'codepager.toml'} is not valid TOML: " in err


@pytest.mark.slow
def test_a_bad_value_names_its_key_the_value_and_where_to_fix_it(tmp_path: Path) -> None:
    """One line a problem (pydantic's report names the model and links its docs instead)."""
    err = refused(tmp_path, "[search]\nmax_results = -5\n[server]\nport = 'http'\n")
    assert "search.max_results: Input should be greater than or equal to 1 (got -5)" in err
    assert "server.port: Input should be a valid integer" in err and "(got 'http')" in err
    assert str(tmp_path / "codepager.toml") in err and "Fix them in" in err
    assert "errors.pydantic.dev" not in err and "validation error for Settings" not in err


def test_a_refused_secret_is_not_echoed(tmp_path: Path) -> None:
    """The error goes to terminals and bug reports, like `codepager config`'s output."""
    err = refused(
        tmp_path, "[sessions]\nsecret_key = ['hunter2-signing-key']\n[server]\nauth_token = ['bearer-secret']\n"
    )
    assert "sessions.secret_key: Input should be a valid string" in err and "server.auth_token" in err
    assert "hunter2" not in err and "bearer-secret" not in err


@pytest.mark.slow
def test_a_refused_section_holding_a_secret_is_not_echoed(tmp_path: Path) -> None:
    """A section given as something else than a table is refused whole, value and all."""
    err = refused(tmp_path, "sessions = ['hunter2-signing-key']\n", CODEPAGER_SERVER='["bearer-secret"]')
    assert "sessions: Input should be a valid dictionary" in err and "server: Input should be" in err
    assert "hunter2" not in err and "bearer-secret" not in err


@pytest.mark.slow
def test_a_variable_that_is_not_json_is_not_blamed_on_the_file(tmp_path: Path) -> None:
    """A section's variable holds JSON; a parse error in it was reported as the file's TOML."""
    err = refused(tmp_path, "[search]\nmax_results = 5\n", CODEPAGER_SERVER="{not json")
    assert "not valid TOML" not in err and 'field "server"' in err


@pytest.mark.slow
def test_a_request_larger_than_all_requests_may_hold_together_is_refused(tmp_path: Path) -> None:
    """All requests still arriving hold at most 64 MiB together: one larger could never come in."""
    err = refused(tmp_path, "[server]\nmax_request_bytes = 100000000\n")
    assert "server.max_request_bytes" in err and "less than or equal to 67108864" in err, err


@pytest.mark.slow
def test_a_long_refused_value_is_shown_cut(tmp_path: Path) -> None:
    """A settings error names the value it refused, but a 5,000-character one is cut."""
    err = refused(tmp_path, f'[search]\nmax_results = "{"x" * 5000}"\n')
    assert "search.max_results: Input should be a valid integer" in err and "(got 'xxx" in err
    assert len(err) < 1000 and "...)" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("[search]\ntimeout_s = inf\n", "search.timeout_s: Input should be a finite number"),
        ("[sessions]\nmax_memory_mb = inf\n", "sessions.max_memory_mb: Input should be a finite number"),
        ("[jq]\ntimeout_s = nan\n", "jq.timeout_s: Input should be a finite number"),
        ("[sql]\ntimeout_s = 1e300\n", "sql.timeout_s: Input should be less than or equal to"),
        ("[offload]\nretention_hours = 1e9\n", "offload.retention_hours: Input should be less than or equal to"),
        ("[proxy]\ncleanup_after_days = 1e9\n", "proxy.cleanup_after_days: Input should be less than or equal to"),
        ('[sql]\nmemory_limit = "1XB"\n', "sql.memory_limit: not a size DuckDB takes"),
        ('[proxy.sql]\nmemory_limit = "lots"\n', "proxy.sql.memory_limit: not a size DuckDB takes"),
        ("[proxy.sql]\ntimeout_s = 1e300\n", "proxy.sql.timeout_s: Input should be less than or equal to"),
    ],
)
def test_a_setting_that_would_fail_at_run_time_is_refused_at_load(tmp_path: Path, toml: str, says: str) -> None:
    """Found by an audit: `timeout_s = inf` (or 1e300) passed, then killed the timer thread, so
    the search ran with no time limit; an infinite memory budget failed the start with a raw
    OverflowError; `memory_limit = "1XB"` failed every SQL call with DuckDB's parser
    error. Each is now refused when the settings load, naming the key."""
    assert says in refused(tmp_path, toml)


@pytest.mark.slow
def test_a_sane_duckdb_size_and_a_year_long_duration_load(tmp_path: Path) -> None:
    toml = '[sql]\nmemory_limit = "2GiB"\n[offload]\nretention_hours = 8760\n[sessions]\ncursor_max_age_s = 31536000\n'
    settings = effective(tmp_path, toml)
    assert settings["sql"]["memory_limit"] == "2GiB" and settings["offload"]["retention_hours"] == 8760


@pytest.mark.slow
def test_toml_nested_too_deeply_or_a_config_that_is_no_file_is_named_as_such(tmp_path: Path) -> None:
    """Before: 100,000 nested `[` was a RecursionError traceback, and a directory passed as
    --config was "config file not found"."""
    assert "is not valid TOML: its arrays or tables nest too deeply" in refused(tmp_path, "a = " + "[" * 100_000)
    done = subprocess.run(
        [str(CODEPAGER), "config", "--config", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "is not a regular file" in done.stderr, done.stderr
