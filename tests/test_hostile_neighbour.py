"""Another user on the same machine (issue 36.8), against a real `codepager serve` over stdio.

The offload dir defaulted to `codepager-<user>` in the shared temp dir, a name anyone can
create first. The server rightly refuses a directory of another user's, so every page too large
to send came back cut inline ("belongs to another user"), with no file, SQL or resource. The
default is now a directory only this user can create: `$XDG_RUNTIME_DIR/codepager` when that is
the user's own, else `offload` in the user's cache dir.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import pytest

from tests.server_helpers import serve_env, stdio_client, structured

pytestmark = pytest.mark.slow

NOBODY = 65534


@pytest.mark.parametrize("runtime", ["ours", "unset", "shared"])
async def test_a_predictable_offload_dir_planted_by_another_user_costs_no_page(tmp_path: Path, runtime: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a directory of another user's takes root")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("needle = 1\n")
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir(mode=0o1777)
    shared_tmp.chmod(0o1777)
    planted = shared_tmp / f"codepager-{getpass.getuser()}"  # the old default, created first by nobody
    planted.mkdir(mode=0o777)
    os.chown(planted, NOBODY, NOBODY)
    env = {
        k: v for k, v in serve_env(tmp_path).items() if k not in ("CODEPAGER_OFFLOAD__OUTPUT_DIR", "XDG_RUNTIME_DIR")
    }
    env |= {"TMPDIR": str(shared_tmp), "XDG_CACHE_HOME": str(tmp_path / "cache-home")}
    expected = tmp_path / "cache-home" / "codepager" / "offload"
    if runtime == "ours":
        (tmp_path / "run").mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
        expected = tmp_path / "run" / "codepager"
    elif runtime == "shared":  # a runtime dir others can write in is no better than the temp dir
        env["XDG_RUNTIME_DIR"] = str(shared_tmp)
    async with stdio_client(root, tmp_path, env) as client:
        body = structured(await client.call_tool("regex_search", {"pattern": "needle", "output_mode": "file_ref"}))
    warnings = body["metadata"].get("warnings") or []
    assert body["results"]["mode"] == "file_ref", warnings
    written = Path(body["results"]["file_ref"]["path"])
    assert written.parent == expected and written.is_file(), written
    assert (expected.stat().st_mode & 0o777) == 0o700 and expected.stat().st_uid == os.geteuid()
    assert list(planted.iterdir()) == []  # nothing written where the neighbour can read it
