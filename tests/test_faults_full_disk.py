"""A disk that fills up in the middle of a write, for real: the server and the proxy run as
subprocesses under a file-size limit (RLIMIT_FSIZE), so the kernel fails their writes part-way
through a file (EFBIG), as a full disk does (ENOSPC) but without needing to mount one. What
must hold: the call still answers (an inline page cut losslessly, or a truncated inline answer),
with a warning that says why, and no torn or temporary file is left behind."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.commands import codepager_cmd
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from tests.code_tree import write_code_tree
from tests.server_helpers import page_matches, serve_env, structured

LIMIT = 8 * 1024  # bytes a process may write into any one file: smaller than a page of matches


def limited(argv: list[str]) -> tuple[str, list[str]]:
    """`argv` run under the file-size limit (set, then exec: the limit outlives the exec)."""
    launcher = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT})); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return sys.executable, ["-c", launcher, *argv]


def test_the_limit_really_fails_writes(tmp_path: Path) -> None:
    # The premise of the tests below: under the limit a bigger write fails part-way.
    command, args = limited([sys.executable, "-c", f"open({str(tmp_path / 'f')!r}, 'wb').write(b'x' * {2 * LIMIT})"])
    status = os.spawnv(os.P_WAIT, command, [command, *args])
    assert status != 0 and (tmp_path / "f").stat().st_size == LIMIT
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] != LIMIT  # the test process itself is unaffected


@pytest.mark.slow
async def test_a_full_offload_disk_falls_back_to_inline_pages_that_lose_nothing(tmp_path: Path) -> None:
    root = write_code_tree(tmp_path / "repo")
    script, script_args = codepager_cmd()
    command, args = limited([script, *script_args, "serve", "--root", str(root)])
    transport = StdioTransport(command, args, env=serve_env(tmp_path), log_file=tmp_path / "server.log")
    async with Client(transport, timeout=120, init_timeout=120) as client:
        # detail=full: pages of the size this limit was chosen against (compact ones are smaller)
        args_ = {"pattern": "needle", "output_mode": "file_ref", "page_size": 100, "detail": "full"}
        body = structured(await client.call_tool("regex_search", args_))
        assert body["results"]["mode"] == "inline"
        assert any("could not be offloaded" in w for w in body["metadata"]["warnings"]), body["metadata"]["warnings"]
        pages = [body]
        while (cursor := body["pagination"]["next_cursor"]) is not None:
            body = structured(
                await client.call_tool("regex_search", {"cursor": cursor, "output_mode": "file_ref", "detail": "full"})
            )
            pages.append(body)
    seen = [m for page in pages for m in page_matches(page)]
    assert len({(m["file"]["path"], m["match"]["line_number"]) for m in seen}) == len(seen) == 240
    # A page small enough to fit under the limit (the last, a few matches) is still offloaded:
    # the fallback is per page. And nothing else is left in the offload dir: no torn file, no .tmp.
    modes = [p["results"]["mode"] for p in pages]
    assert modes[0] == "inline" and modes[-1] == "file_ref", modes
    written = [Path(p["results"]["file_ref"]["path"]).name for p in pages if p["results"]["mode"] == "file_ref"]
    assert sorted(p.name for p in (tmp_path / "offload").iterdir()) == written


@pytest.mark.slow
async def test_a_full_data_disk_gives_the_proxy_a_truncated_inline_answer(tmp_path: Path) -> None:
    script, script_args = codepager_cmd()
    data = tmp_path / "data"
    command, args = limited(
        [
            script,
            *script_args,
            "proxy",
            "--data-dir",
            str(data),
            "--threshold-tokens",
            "1000",
            "--",
            sys.executable,
            BACKEND,
        ]
    )
    transport = StdioTransport(command, args, env=serve_env(tmp_path), log_file=tmp_path / "proxy.log")
    async with Client(transport, timeout=120, init_timeout=120) as client:
        body = structured(await client.call_tool("records", {"n": 2000}))
        small = structured(await client.call_tool("records", {"n": 60}))
    assert body["intercepted"] == "truncated" and "could not be saved" in body["warning"]
    assert body["text"].startswith('[{"id": 0, "kind": "alpha"')
    assert small["intercepted"] == "saved_as_dataset"  # a dataset that fits is still saved
    saved = sorted(p.name for p in data.rglob("*") if p.is_file())
    assert saved == sorted(Path(small["dataset"][k]).name for k in ("data_path", "metadata_path"))
