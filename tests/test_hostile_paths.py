"""Hostile paths through the real MCP path: `..`, absolute paths outside the roots, symlinks
pointing out, device files and FIFOs inside the root (must not hang), very deep trees, and file
names with newlines, colons and invalid UTF-8. Nothing outside the root is ever read or named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.app import build_app
from tests.hostile_helpers import SyncClient
from tests.server_helpers import make_settings, page_matches, structured

DEPTH = 120  # directories: ~720 characters of path, deeper than any real repository


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("paths")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle in the secret file\n")
    root = tmp / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("needle = 1\n")
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    (root / "secret_link.txt").symlink_to(outside / "secret.txt")
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


def tool_error(client: SyncClient, args: dict) -> dict:
    result = client.call("regex_search", args, raise_on_error=False)
    assert result.is_error, result.structured_content
    return result.structured_content["error"]


def all_matches(client: SyncClient, args: dict) -> list[dict]:
    body = structured(client.call("regex_search", {"page_size": 200, **args}))
    assert body["pagination"]["next_cursor"] is None
    return page_matches(body)


@pytest.mark.parametrize(
    "path",
    ["..", "../outside", "../outside/secret.txt", "src/../../outside", "./../outside", "src/../..", "/etc", "/",
     "/etc/passwd", "link_out", "link_out/secret.txt", "secret_link.txt", "zero", "urandom", "/dev/zero",
     "../outside/does-not-exist", "/nonexistent/dir"],
)  # fmt: skip
def test_paths_that_leave_the_root_are_refused(client, tree, path):
    error = tool_error(client, {"pattern": "needle", "path": path})
    assert error["code"] == "invalid_path"
    assert "outside the allowed roots" in error["message"]
    assert "secret" not in error["message"].replace(path, "")  # nothing about the target leaks


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
