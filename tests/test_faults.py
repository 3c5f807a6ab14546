"""Environment faults the server must survive without a restart: an offload dir that cannot be
written (pages fall back to inline, cut losslessly, with a warning) and an index/cache dir that
cannot be written (the server still starts and regex search works; semantic search says
clearly what is wrong). Redis going away is in test_replicas.py. The directories are made
unusable by putting them under a regular file: the tests run as root, which chmod does not stop."""

from __future__ import annotations

import logging

import pytest

from server.app import build_app
from tests.conftest import write_code_tree
from tests.hostile_helpers import SyncClient
from tests.server_helpers import make_settings, structured


@pytest.fixture
def blocked(tmp_path):
    blocker = tmp_path / "a-regular-file"
    blocker.write_text("not a directory\n")
    return blocker


def test_an_unwritable_offload_dir_falls_back_to_inline_pages_that_lose_nothing(tmp_path, blocked):
    root = write_code_tree(tmp_path / "repo")
    sync = SyncClient(build_app(make_settings(root, tmp_path, offload={"output_dir": blocked / "offload"})))
    try:
        body = structured(sync.call("regex_search", {"pattern": "needle", "output_mode": "file_ref", "page_size": 100}))
        assert body["results"]["mode"] == "inline"
        assert any("could not be offloaded" in w and "offload" in w for w in body["metadata"]["warnings"])
        seen = body["results"]["matches"]
        while (cursor := body["pagination"]["next_cursor"]) is not None:
            body = structured(sync.call("regex_search", {"cursor": cursor, "output_mode": "file_ref"}))
            seen += body["results"]["matches"]
        assert len(seen) == 240
        assert len({(m["file"]["path"], m["match"]["line_number"]) for m in seen}) == 240
    finally:
        sync.close()


def test_an_unwritable_cache_dir_keeps_regex_working_and_semantic_says_why(tmp_path, blocked, caplog):
    root = write_code_tree(tmp_path / "repo")
    settings = make_settings(root, tmp_path, index={"cache_dir": blocked / "cache"}, sessions={"secret_key": None})
    with caplog.at_level(logging.WARNING, logger="codepager"):
        sync = SyncClient(build_app(settings))  # no secret key configured and nowhere to keep one
    try:
        assert "cursors will not survive a restart" in caplog.text
        walked = structured(sync.call("regex_search", {"pattern": "needle", "page_size": 200}))
        rest = structured(sync.call("regex_search", {"cursor": walked["pagination"]["next_cursor"]}))
        assert len(walked["results"]["matches"]) + len(rest["results"]["matches"]) == 240

        result = sync.call("hybrid_search", {"query": "needle function"}, raise_on_error=False)
        assert result.is_error
        error = result.structured_content["error"]
        assert error["code"] in ("index_unavailable", "model_unavailable"), error
        assert "cache" in error["message"] and "regex_search still works" in error["hint"]
        status = structured(sync.call("index_status", {}))
        assert status["error"] and not status["building"]
    finally:
        sync.close()
