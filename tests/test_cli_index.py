"""`codepager index`: build, update, rebuild, status (text and JSON), progress, errors."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infra import UnsafeDirectoryError, check_cache_dir
from server.app import build_app, build_services
from server.cli import main
from server.cli.index_cmd import ProgressBar
from server.errors import error_result
from server.settings import load_settings

CODEPAGER = Path(sys.executable).parent / "codepager"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A settings file with the test's own cache dir."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    path = tmp_path / "codepager.toml"
    path.write_text(f'[index]\ncache_dir = "{cache}"\n')
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "jobs.py").write_text(
        'def schedule(job, delay):\n    """Run a job later."""\n    return queue.put(job, delay)\n'
    )
    (root / "notes.md").write_text("# Notes\n\nHow jobs are scheduled.\n")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["index", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_build_then_update_then_full_rebuild(project: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(project), "--config", str(config))
    assert code == 0 and out.startswith("rebuilt: 2 files, ") and "generation 1" in out
    code, out, _ = run(capsys, str(project), "--config", str(config))
    assert code == 0 and out.startswith("up to date: 2 files") and "(0 embedded)" in out
    (project / "src" / "more.py").write_text("def cancel(job):\n    return queue.remove(job)\n")
    code, out, _ = run(capsys, str(project), "--config", str(config), "--json")
    stats = json.loads(out)
    assert code == 0 and (stats["added"], stats["generation"], stats["chunks_embedded"]) == (1, 2, 1)
    code, out, _ = run(capsys, str(project), "--config", str(config), "--full")
    assert code == 0 and out.startswith("rebuilt: 3 files") and "generation 3" in out


def test_status_text_and_json(project: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(project), "--config", str(config), "--status")
    assert code == 0 and "not built yet" in out
    run(capsys, str(project), "--config", str(config))
    code, out, _ = run(capsys, str(project), "--config", str(config), "--status")
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert code == 0
    assert fields["files"] == "2" and fields["generation"] == "1"
    assert fields["model"].startswith("static-minilm-")
    assert fields["size"].endswith(("KB", "MB")) and "ago" in fields["updated"]
    assert int(fields["chunks"]) >= 2
    code, out, _ = run(capsys, str(project), "--config", str(config), "--status", "--json")
    status = json.loads(out)
    assert code == 0 and status["exists"] and status["files"] == 2 and status["dim"] == 256
    assert status["root"] == str(project.resolve())


@pytest.mark.minilm
def test_model_flag_changes_the_model_and_status_says_so(
    project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, str(project), "--config", str(config))
    code, out, _ = run(capsys, str(project), "--config", str(config), "--status", "--model", "minilm")
    assert code == 0 and "stale" in out and "minilm" in out


def test_the_old_profile_flag_is_refused_naming_the_new_one(
    project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(project), "--config", str(config), "--profile", "minilm")
    assert (code, out) == (2, "") and "--profile is now --model (--model minilm)" in err


def test_errors_exit_2_with_a_message(
    project: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(project), "--config", str(config), "--model", str(tmp_path / "missing-model"))
    assert (code, out) == (2, "") and "does not exist" in err and "never downloaded" in err
    code, _, err = run(capsys, str(tmp_path / "nowhere"), "--config", str(config))
    assert code == 2 and "not a directory" in err
    code, _, err = run(capsys, str(project), "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "config file not found" in err
    blocked = tmp_path / "blocked.toml"  # the cache dir is a file: nothing can be written
    (tmp_path / "a-file").write_text("")
    blocked.write_text(f'[index]\ncache_dir = "{tmp_path / "a-file"}"\n')
    code, _, err = run(capsys, str(project), "--config", str(blocked))
    assert code == 2 and "cannot write the index under index.cache_dir" in err


def test_progress_bar_draws_phases_on_one_line() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar("embed", 0, 200)
    bar("embed", 200, 200)
    bar.finish()
    drawn = stream.getvalue()
    assert "\rembed  [" + "." * 30 + "] 0/200" in drawn
    assert "\rembed  [" + "#" * 30 + "] 200/200" in drawn
    assert drawn.endswith("\r\x1b[K")


@pytest.mark.slow
def test_the_installed_command_indexes_a_tree(project: Path, config: Path) -> None:
    proc = subprocess.run(
        [str(CODEPAGER), "index", str(project), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("rebuilt: 2 files")
    assert proc.stderr == ""  # not a terminal: no progress bar drawn


def test_a_cache_dir_others_can_write_in_is_refused_or_made_private(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache dir holds the cursor key and every index, text included, and codepager reads
    what is there as its own. Before: it was used whoever owned it and whatever its mode (an
    audit planted an index in a 0777 one). Now a shared sticky one (`/tmp` itself) is refused
    with what to do, and one of ours others may write in loses those write bits (0777 -> 0755:
    it may be a root, whose mode is the user's); `serve` refuses the first too (another user's
    one is refused alike: `infra.private_dir`)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    config = tmp_path / "shared.toml"
    config.write_text(f'[index]\ncache_dir = "{shared}"\n')
    code, out, err = run(capsys, str(project), "--config", str(config))
    assert (code, out) == (2, "") and "shared directory" in err and "index.cache_dir" in err, err
    assert list(shared.iterdir()) == []
    with pytest.raises(ValueError, match="shared directory"):
        build_services(load_settings(None, {"index": {"cache_dir": shared}, "server": {"roots": [project]}}))
    # with a configured key the cursor key never touches the dir, but the index does: still
    # refused at start (the index tools make the index manager), and mapped for agents
    keyed = {"index": {"cache_dir": shared}, "server": {"roots": [project]}, "sessions": {"secret_key": "k" * 32}}
    with pytest.raises(ValueError, match="shared directory"):
        build_app(load_settings(None, keyed))
    with pytest.raises(UnsafeDirectoryError) as refused:
        check_cache_dir(shared)
    error = (error_result(refused.value).structured_content or {})["error"]
    assert error["code"] == "cache_dir_refused" and error["message"] == str(refused.value), error
    assert "point index.cache_dir at a directory of this user's" in error["hint"], error

    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    config.write_text(f'[index]\ncache_dir = "{open_dir}"\n')
    code, out, _ = run(capsys, str(project), "--config", str(config))
    assert code == 0 and (open_dir.stat().st_mode & 0o777) == 0o755, oct(open_dir.stat().st_mode)


@pytest.mark.parametrize("mode", ["--sem", "--hybrid"])
def test_a_semantic_search_from_the_command_line_checks_the_cache_dir_too(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    """Found by a review: the check was made by each entry point (`serve`, `proxy`, `index`)
    and `codepager search --sem` forgot it, so it built its index in a 0777 cache dir and left
    it so. The check is now made by the index manager and the cursor key themselves, so no
    entry point can forget it."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    config = tmp_path / "open.toml"
    config.write_text(f'[index]\ncache_dir = "{open_dir}"\n')
    code = main(["search", mode, "schedule a job", str(project), "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 0 and out, err
    assert (open_dir.stat().st_mode & 0o777) == 0o755, oct(open_dir.stat().st_mode)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    config.write_text(f'[index]\ncache_dir = "{shared}"\n')
    code = main(["search", mode, "schedule a job", str(project), "--config", str(config)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and "shared directory" in err and "index.cache_dir" in err, err
    assert list(shared.iterdir()) == []


def test_the_cache_dir_check_keeps_setgid_and_refuses_another_users_link(tmp_path: Path) -> None:
    """Found by a review of the check above: it dropped a group dir's setgid bit with the write
    bits (2775 -> 0755), and it checked only where a link led, so another user's link in a
    sticky dir could be pointed elsewhere after the check. Now only the write bits go, and a
    link of another user's is refused. (As root, lchown stands for the other user.)"""
    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o2775)
    check_cache_dir(group)
    assert stat.S_IMODE(group.stat().st_mode) == 0o2755, oct(group.stat().st_mode)
    if os.geteuid() != 0:
        return  # making a link another user's takes root; the rest is checked where CI runs, as root
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    link = sticky / "codepager-cache"
    os.symlink(ours, link)
    os.lchown(link, 65534, 65534)
    with pytest.raises(ValueError, match="link of another user's"):
        check_cache_dir(link)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ValueError, match="belongs to another user"):
        check_cache_dir(theirs)
