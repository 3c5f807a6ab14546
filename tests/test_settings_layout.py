"""The shape of the settings (issue 40.4, a configuration a user can hold in mind): few keys,
each limit in the section of what it limits (`[sql]`, `[jq]`), the proxy's SQL limits as an
override of `[sql]` (`[proxy.sql]`), a key of an earlier version refused with where it went
rather than silently dropped, and no module holding a value it read from the settings models
when it was imported."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from server.cli import build_parser
from server.cli.proxy_cmd import proxy_overrides
from server.output import OffloadStore
from server.proxy.dataset_store import DatasetStore
from server.settings import (
    MOVED_SETTINGS,
    REMOVED_SETTINGS,
    OffloadSettings,
    ProxySettings,
    ProxySqlSettings,
    Settings,
    SqlSettings,
    load_settings,
)
from tests.server_helpers import run_config

REPO = Path(__file__).resolve().parents[1]
#: The most settings there may be (68 before issue 40.4, whose goal was at most 40).
MAX_SETTINGS = 40


def all_keys() -> list[str]:
    """Every setting as `section.key` (a table such as `proxy.sql` or `offload.clients` is one)."""
    keys = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type)
        keys += [f"{section}.{key}" for key in model.model_fields]
    return keys


def test_there_are_few_settings() -> None:
    keys = all_keys()
    assert len(keys) == len(set(keys)) <= MAX_SETTINGS, keys


def test_sql_and_jq_are_sections_of_their_own() -> None:
    keys = set(all_keys())
    assert {"sql.memory_limit", "sql.threads", "sql.timeout_s", "sql.max_rows", "jq.timeout_s"} <= keys
    assert not any(k.startswith(("offload.jq_", "offload.duckdb_", "proxy.duckdb_")) for k in keys)


def test_proxy_sql_overrides_only_the_keys_it_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[proxy.sql]` takes any `[sql]` key; what it leaves out is `[sql]`'s, except memory and
    threads, which the proxy has more of by default (its datasets are whole tool results)."""
    assert set(ProxySqlSettings.model_fields) == set(SqlSettings.model_fields)
    default = Settings().proxy_sql()
    assert (default.memory_limit, default.threads) == ("1GB", 2)
    assert default.model_dump(exclude={"memory_limit", "threads"}) == SqlSettings().model_dump(
        exclude={"memory_limit", "threads"}
    )
    config = tmp_path / "codepager.toml"
    config.write_text('[sql]\nmax_rows = 500\ntimeout_s = 9\nmemory_limit = "256MB"\n[proxy.sql]\ntimeout_s = 60\n')
    monkeypatch.setenv("CODEPAGER_PROXY__SQL__THREADS", "3")
    settings = load_settings(config)
    assert (settings.sql.max_rows, settings.sql.timeout_s, settings.sql.threads) == (500, 9, 1)
    proxy = settings.proxy_sql()
    assert (proxy.max_rows, proxy.timeout_s, proxy.threads, proxy.memory_limit) == (500, 60, 3, "1GB")


def test_a_proxy_flag_changes_one_proxy_sql_key_and_keeps_the_others(tmp_path: Path) -> None:
    """`proxy --duckdb-threads` is merged into `[proxy.sql]` key by key: the file's other keys
    there stay."""
    config = tmp_path / "codepager.toml"
    config.write_text('[proxy.sql]\nmemory_limit = "2GB"\ntimeout_s = 60\n')
    args = build_parser().parse_args(["proxy", "--duckdb-threads", "4", "--", "backend"])
    proxy = load_settings(config, proxy_overrides(args)).proxy_sql()
    assert (proxy.threads, proxy.memory_limit, proxy.timeout_s) == (4, "2GB", 60)


def refusal(old: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str = "7") -> str:
    """The error of loading settings that give the old key `old` (`section.key`) from `source`."""
    section, _, key = old.partition(".")
    config = tmp_path / "codepager.toml"
    config.write_text(f"[{section}]\n{key} = {value}\n" if source == "toml" else "")
    if source == "env":
        monkeypatch.setenv(f"CODEPAGER_{section.upper()}__{key.upper()}", value)
    with pytest.raises(ValueError) as refused:
        load_settings(config)
    return str(refused.value)


@pytest.mark.parametrize("source", ["toml", "env"])
@pytest.mark.parametrize("old", sorted(MOVED_SETTINGS))
def test_a_moved_key_is_refused_naming_where_it_is_now(
    old: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old file (or variable) is never read with a limit silently dropped: it is refused,
    and the message says the new key, its table and its variable."""
    new = MOVED_SETTINGS[old]
    table, _, key = new.rpartition(".")
    err = refusal(old, source, tmp_path, monkeypatch, '"1GB"' if old.endswith("memory_limit") else "7")
    assert f"{old} is now {new}: write it as `{key}` under [{table}]" in err, err
    assert f"CODEPAGER_{new.upper().replace('.', '__')}" in err


@pytest.mark.parametrize("source", ["toml", "env"])
@pytest.mark.parametrize("old", sorted(REMOVED_SETTINGS))
def test_a_key_that_is_no_longer_a_setting_is_refused_saying_what_is_used(
    old: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    err = refusal(old, source, tmp_path, monkeypatch)
    assert f"{old} is no longer a setting (codepager uses {REMOVED_SETTINGS[old]}): remove it" in err


def test_no_old_key_names_a_current_one() -> None:
    """A key that moved or went must not be a key again: the refusal would refuse it."""
    current = set(all_keys())
    assert not {*MOVED_SETTINGS, *REMOVED_SETTINGS} & current
    assert all(new in current or new.startswith("proxy.sql.") for new in MOVED_SETTINGS.values())


@pytest.mark.slow
def test_the_cli_refuses_an_old_file_with_the_new_names(tmp_path: Path) -> None:
    done = run_config(
        tmp_path, "[offload]\njq_timeout_s = 9\nduckdb_threads = 4\n[proxy]\nduckdb_memory_limit = '2GB'\n"
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert "offload.jq_timeout_s is now jq.timeout_s" in done.stderr
    assert "offload.duckdb_threads is now sql.threads" in done.stderr
    assert "proxy.duckdb_memory_limit is now proxy.sql.memory_limit: write it as `memory_limit` under [proxy.sql]" in (
        done.stderr
    )


# -- nothing read from the settings models when a module is imported ---------------------------


def _import_time_reads(path: Path) -> list[str]:
    """Calls that read the settings models (`default_of(...)`, `XSettings(...)`) made when
    `path` is imported: at module level, in a class body, or in a default argument."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def reads(node: ast.AST) -> None:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                name = call.func.id
                if name == "default_of" or (name.endswith("Settings") and name != "Settings"):
                    found.append(f"{path.relative_to(REPO)}:{call.lineno}: {name}(...)")

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for default in [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]:
                    reads(default)
            elif isinstance(stmt, ast.ClassDef):
                visit(stmt.body)
            else:
                reads(stmt)

    visit(tree.body)
    return found


@pytest.mark.slow
def test_no_module_reads_settings_when_imported() -> None:
    """`server/jq/sandbox.py` made its worker slots and `server/response.py`, `server/output/offload.py`
    and `server/proxy/dataset_store.py` their defaults from the settings models at import: a
    value changed afterwards (by a test, or a model default) was not what they used."""
    modules = [p for p in (REPO / "server").rglob("*.py") if p.name != "settings.py"]
    found = [read for path in modules for read in _import_time_reads(path)]
    assert found == []


def test_a_settings_default_changed_after_import_is_what_the_stores_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stores read their defaults when made, not when their module was imported."""
    fields: dict[str, Any] = {**OffloadSettings.model_fields}
    monkeypatch.setattr(fields["retention_hours"], "default", 5.0)
    monkeypatch.setattr(ProxySettings.model_fields["cleanup_after_days"], "default", 2.0)
    store = OffloadStore(tmp_path / "offload")
    assert store.retention_s == 5 * 3600.0
    assert DatasetStore(tmp_path / "data").retention_days == 2.0
