"""Hostile paths through the real MCP path: `..`, absolute paths outside the roots, symlinks
pointing out, device files and FIFOs inside the root (must not hang), very deep trees, and file
names with newlines, colons and invalid UTF-8. Nothing outside the root is ever read or named."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from harness.results import structured_of
from server.app import build_app
from tests.hostile_helpers import SyncClient
from tests.server_helpers import make_settings, page_matches, serve_env, stdio_client, structured

DEPTH = 120  # directories: ~720 characters of path, deeper than any real repository


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("paths")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle in the secret file\n")
    root = tmp / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("needle = 1\n")
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    (root / "secret_link.txt").symlink_to(outside / "secret.txt")
    (root / "dangling_out").symlink_to(tmp / "no-such-target")
    (outside / "loop").symlink_to(outside / "loop")
    (root / "zero").symlink_to("/dev/zero")
    (root / "urandom").symlink_to("/dev/urandom")
    os.mkfifo(root / "pipe")
    deep = root.joinpath(*(["d"] * DEPTH))
    deep.mkdir(parents=True)
    (deep / "bottom.py").write_text("needle at the bottom\n")
    (root / "new\nline.py").write_text("needle after a newline name\n")
    (root / "co:lon:1:2.py").write_text("needle in a colon name\n")
    with open(os.path.join(os.fsencode(root), b"bad\xff\xfename.py"), "wb") as f:
        f.write(b"needle in a non-UTF-8 name\n")
    return root


@pytest.fixture(scope="module")
def client(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paths-settings")
    sync = SyncClient(build_app(make_settings(tree, tmp, search={"timeout_s": 20})))
    yield sync
    sync.close()


def tool_error(client: SyncClient, args: dict[str, Any]) -> dict[str, Any]:
    result = client.call("regex_search", args, raise_on_error=False)
    assert result.is_error, result.structured_content
    error: dict[str, Any] = structured_of(result.structured_content)["error"]
    return error


def all_matches(client: SyncClient, args: dict[str, Any]) -> list[dict[str, Any]]:
    body = structured(client.call("regex_search", {"page_size": 200, **args}))
    assert body["pagination"]["next_cursor"] is None
    return page_matches(body)


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../outside",
        "../outside/secret.txt",
        "src/../../outside",
        "./../outside",
        "src/../..",
        "/etc",
        "/",
        "/etc/passwd",
        "link_out",
        "link_out/secret.txt",
        "secret_link.txt",
        "zero",
        "urandom",
        "/dev/zero",
        "../outside/does-not-exist",
        "/nonexistent/dir",
    ],
)
def test_paths_that_leave_the_root_are_refused(client, tree, path):
    error = tool_error(client, {"pattern": "needle", "path": path})
    assert error["code"] == "invalid_path"
    assert "outside the allowed roots" in error["message"]
    assert "secret" not in error["message"].replace(path, "")  # nothing about the target leaks


OUTSIDE_PROBES = [
    "../outside/secret.txt",  # an existing file
    "../outside",  # an existing directory
    "../outside/does-not-exist",  # nothing there
    "../outside/secret.txt/x",  # under a file: "Not a directory"
    "/etc/passwd/x",
    "../outside/loop/x",  # a symlink loop
    "link_out/does-not-exist",  # through a link in the root
    "secret_link.txt/x",
    "dangling_out",  # a link in the root whose target does not exist
    "/nonexistent/dir",
]


def test_every_path_outside_the_roots_gets_the_same_answer(client, tree):
    """What exists outside the roots, and where a link points, must not be learnable from the
    error: every probe gets the same answer but for the path itself, which is all it shows."""
    answers = {}
    for path in OUTSIDE_PROBES:
        error = tool_error(client, {"pattern": "needle", "path": path})
        answers[path] = {k: (v.replace(path, "<path>") if isinstance(v, str) else v) for k, v in error.items()}
    assert len({repr(a) for a in answers.values()}) == 1, answers
    answer = answers[OUTSIDE_PROBES[0]]
    assert answer["code"] == "invalid_path" and "outside the allowed roots" in answer["message"]
    assert str(tree.parent) not in answer["message"].replace(str(tree), "<root>")  # no link target


def test_a_root_search_never_reads_through_links_or_devices(client, tree):
    """Links out, /dev/zero and a FIFO sit in the root: the search finishes and stays inside."""
    matches = all_matches(client, {"pattern": "needle"})
    paths = {m["path"] for m in matches}
    assert not any(m["text"].endswith("secret file") for m in matches)
    assert not any(p.startswith(("link_out", "secret_link", "zero", "urandom", "pipe")) for p in paths)
    assert "src/ok.py" in paths


def test_a_fifo_named_directly_is_refused_not_waited_on(client):
    """Opening a FIFO blocks until a writer appears: it must never be handed to the search."""
    error = tool_error(client, {"pattern": "needle", "path": "pipe"})
    assert error["code"] == "invalid_path"
    assert "not a regular file or directory" in error["message"]


def test_a_very_deep_tree_is_searched_and_addressable(client):
    deep = "/".join(["d"] * DEPTH)
    (m,) = [m for m in all_matches(client, {"pattern": "at the bottom"})]
    assert m["path"] == f"{deep}/bottom.py"
    (again,) = all_matches(client, {"pattern": "needle", "path": deep})
    assert again["path"] == m["path"]


def test_strange_file_names_are_reported_exactly_and_can_be_searched_again(client):
    by_content = {m["text"]: m["path"] for m in all_matches(client, {"pattern": "name"})}
    assert by_content["needle after a newline name"] == "new\nline.py"
    assert by_content["needle in a colon name"] == "co:lon:1:2.py"
    # Not valid UTF-8: shown with escapes (the JSON stays valid UTF-8), never dropped.
    assert by_content["needle in a non-UTF-8 name"] == "bad\\xff\\xfename.py"
    for path in ("new\nline.py", "co:lon:1:2.py"):
        (m,) = all_matches(client, {"pattern": "needle", "path": path})
        assert m["path"] == path


@pytest.mark.parametrize("path", ["src\x00/ok.py", "src/\ud800", "\udcff"], ids=["nul", "surrogate", "escaped-byte"])
def test_paths_no_file_system_call_can_take_are_refused_clearly(client, path):
    error = tool_error(client, {"pattern": "needle", "path": path})
    assert error["code"] == "invalid_path"
    error["message"].encode("utf-8")  # the message itself is valid text on the wire


async def _progress(client: Client[Any]) -> dict[str, Any]:
    progress: dict[str, Any] = structured(await client.call_tool("index_status", {}))["progress"]
    return progress


async def _wait_for_phase(
    client: Client[Any], ready: Callable[[dict[str, Any]], bool], timeout_s: float = 300
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = await _progress(client)
        if ready(progress):
            return progress
        assert progress["phase"] not in ("ready", "failed"), progress
        await asyncio.sleep(0.02)
    raise TimeoutError("the build never reached the phase")


@pytest.mark.slow
async def test_a_directory_swapped_for_a_link_during_a_real_build_never_reaches_hybrid_search(tmp_path):
    """The attack on a real `codepager serve`: while the index builds, swap `zzz/` (listed,
    not read yet) for a link to an outside directory holding a file of the same name; once
    the chunks are read, put the real directory back (same mtime and size, so a re-scan keeps
    what was read). The outside file's content used to come back from hybrid_search."""
    outside = tmp_path / "outside" / "zzz"
    outside.mkdir(parents=True)
    (outside / "leak.py").write_text("def leaked_credentials():\n    return 'OUTSIDE_SECRET_TOKEN'\n")
    root = tmp_path / "repo"
    for i in range(1500):  # read before zzz/: seconds of chunking, the window for the swap
        path = root / "aaa" / f"m{i // 100}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(f"def handler_{i}_{j}(request):\n    return request.value + {j}\n\n\n" for j in range(6))
        )
    (root / "zzz").mkdir()
    (root / "zzz" / "leak.py").write_text("def leaked_credentials():\n    return 'inside, harmless'\n")
    async with stdio_client(root, tmp_path, serve_env(tmp_path, index__index_on_start="true")) as c:
        # zzz/leak.py is the last file read; done is reported every 64 files
        await _wait_for_phase(c, lambda p: p["phase"] == "chunk" and p["done"] + 64 < p["total"])
        (root / "zzz").rename(root / ".zzz-real")
        (root / "zzz").symlink_to(outside, target_is_directory=True)
        after_swap = await _progress(c)
        assert after_swap["phase"] == "chunk" and after_swap["done"] + 64 < after_swap["total"], "swapped too late"
        await _wait_for_phase(c, lambda p: p["phase"] == "embed" or (p["phase"] == "write" and p["done"] == 0))
        (root / "zzz").unlink()
        (root / ".zzz-real").rename(root / "zzz")
        body = structured(
            await c.call_tool(
                "hybrid_search", {"query": "leaked_credentials OUTSIDE_SECRET_TOKEN", "path": "zzz", "top_k": 10}
            )
        )
    contents = [r.get("text", "") for r in page_matches(body)]
    assert not any("OUTSIDE_SECRET_TOKEN" in text for text in contents), contents
    assert any("inside, harmless" in text for text in contents), contents  # the file is searched, read from inside
