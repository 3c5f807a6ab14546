"""A cloned repository's ignore files against real `codepager serve` and `codepager search`
processes (stdio, real rg, the shipped model): a `.gitignore` linked to the reader's own
output, and an ignore file linked to `/dev/zero` read by several searches at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.commands import codepager_cmd
from tests.index_helpers import REPO
from tests.server_helpers import page_matches, serve_env, stdio_client, structured

pytestmark = pytest.mark.slow


def cloned(tmp_path: Path, link: str, target: str) -> Path:
    """A clone of a repository that committed `link -> target`: git stores links, and a clone
    makes them again."""
    origin = tmp_path / "origin"
    (origin / "sub").mkdir(parents=True)
    (origin / "a.py").write_text("def a():\n    return 'needle'\n")
    (origin / "sub" / "b.py").write_text("def b():\n    return 'needle'\n")
    (origin / link).symlink_to(target)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "hostile"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    assert os.readlink(clone / link) == target
    return clone


async def test_a_gitignore_linked_to_stdout_no_longer_stalls_any_search(tmp_path: Path, model_cache: Path) -> None:
    """`.gitignore -> /proc/self/fd/1` made rg read its own output pipe: regex_search,
    hybrid_search (discovery stalled, the index was never built) and `codepager search` all
    waited out their time limit, and the error told the agent to narrow the search. Now the
    link is not read (a warning says so) and every search answers at once."""
    clone = cloned(tmp_path, ".gitignore", "/proc/self/fd/1")
    env = serve_env(tmp_path, search__timeout_s="20", index__cache_dir=str(model_cache))
    async with stdio_client(clone, tmp_path, env) as client:
        started = time.monotonic()
        regex = structured(await client.call_tool("regex_search", {"pattern": "needle"}))
        regex_s = time.monotonic() - started
        started = time.monotonic()
        hybrid = structured(await client.call_tool("hybrid_search", {"query": "needle"}))
        hybrid_s = time.monotonic() - started
    cmd, args = codepager_cmd()
    started = time.monotonic()
    cli = subprocess.run(
        [cmd, *args, "search", "--jsonl", "needle"], cwd=clone, env=env, capture_output=True, text=True, timeout=60
    )
    cli_s = time.monotonic() - started
    assert regex_s < 5 and cli_s < 5 and hybrid_s < 15, (regex_s, cli_s, hybrid_s)
    assert sorted({m["path"] for m in page_matches(regex)}) == ["a.py", "sub/b.py"]
    assert {m["path"] for m in page_matches(hybrid)} == {"a.py", "sub/b.py"}
    assert cli.returncode == 0, cli.stderr
    assert sorted({json.loads(line)["path"] for line in cli.stdout.splitlines()}) == ["a.py", "sub/b.py"]
    said = "an ignore file was not read: .gitignore is a link that leads out of the root, to /proc/self/fd/1"
    for warnings in (regex["metadata"]["warnings"], hybrid["metadata"]["warnings"], cli.stderr.splitlines()):
        assert any(said in w for w in warnings), warnings


_PARALLEL_PROBE = """
import asyncio, json, resource, sys
from pathlib import Path
from tests.server_helpers import serve_env, stdio_client, structured

async def main(root, tmp):
    async with stdio_client(root, tmp, serve_env(tmp)) as client:
        paths = (None, "sub", None, "sub")
        calls = [client.call_tool("regex_search", {"pattern": "needle", "path": p}) for p in paths]
        return [structured(r) for r in await asyncio.gather(*calls)]

answers = asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"answers": answers, "peak_bytes": peak}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="memory is measured from Linux's rusage")
def test_parallel_searches_of_an_ignore_file_linked_to_dev_zero_stay_small(tmp_path: Path) -> None:
    """`sub/.ignore -> /dev/zero`: 4 parallel regex_search calls peaked at 3.1 GB of rg, 8 at
    5.7-7.1 GB (each rg capped at 2 GiB, nothing capping how many), and each failed. Now the
    link is not read, at most `DEFAULT_RG_MAX_CONCURRENT` (4) rg run at once, each held to 196 MiB:
    the 4 calls answer with every file, and no process of the server (rg included) grows past
    a few hundred MB. The probe, a process of its own, reports the peak of the server and every
    rg it ran (RUSAGE_CHILDREN: the largest of them) after the server has exited."""
    clone = cloned(tmp_path, "sub/.ignore", "/dev/zero")
    probe = subprocess.run(
        [sys.executable, "-c", _PARALLEL_PROBE, str(clone), str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout)
    found = [sorted({m["path"] for m in page_matches(answer)}) for answer in seen["answers"]]
    assert found == [["a.py", "sub/b.py"], ["sub/b.py"]] * 2
    for answer in seen["answers"]:
        said = "sub/.ignore is a link that leads out of the root, to /dev/zero"
        assert any(said in w for w in answer["metadata"]["warnings"]), answer["metadata"]
    assert seen["peak_bytes"] < 400 << 20, seen["peak_bytes"]
