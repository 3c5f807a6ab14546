"""The cursor findings of the security review, each reproduced against a real `codepager serve`
(and `codepager proxy` for dataset cursors) over streamable HTTP on 127.0.0.1:

- a decompression-bomb cursor: a forged cursor that inflates to 100 MB must be refused without
  the server's peak RSS (VmHWM, /proc) growing by 20 MB; an absurdly long one is refused up front;
- a cursor minted by a server rooted elsewhere (same key: the default key file in a shared cache
  dir) must not search outside this server's roots;
- search parameters sent with a cursor must match its search (not be silently ignored), while
  presentation options may change per page;
- a cursor must not be readable: no root path, no pattern after base64 and inflating.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.http_server import HttpServer
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from tests.code_tree import write_code_tree
from tests.hostile_helpers import PeakRssGrowth, refused_async
from tests.server_helpers import serve_env, structured

MB = 2**20
BOMB_BYTES = 100 * MB  # what the forged cursors below inflate to
MAX_GROWTH = 20 * MB


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def deflated_bomb(wbits: int) -> bytes:
    """JSON of BOMB_BYTES that deflates ~1000:1, built in pieces (the bomb is never held whole)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = [packer.compress(b'{"v":1,"k":"ffffffff","p":"')]
    chunk = b"A" * MB
    parts += [packer.compress(chunk) for _ in range(BOMB_BYTES // MB)]
    parts.append(packer.compress(b'"}') + packer.flush())
    return b"".join(parts)


def signed_format_bomb() -> str:
    """The reported attack: the signed (itsdangerous) cursor shape, payload a zlib bomb, a
    signature of zeros. Its signature fails, and the old code inflated the payload anyway to
    tell "tampered" from "signed with another key"."""
    stamp = int(time.time()).to_bytes(4, "big")
    return f".{b64(deflated_bomb(15))}.{b64(stamp)}.{b64(bytes(32))}"


def sealed_format_bomb(genuine: str) -> str:
    """The same bomb in the shape of the server's own cursors: its key id (the clear prefix of a
    genuine cursor), a nonce, the raw-deflate bomb as ciphertext, a made-up tag."""
    return genuine[:8] + b64(os.urandom(12) + b"\x01" + deflated_bomb(-15) + os.urandom(16))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_code_tree(tmp_path_factory.mktemp("secproj") / "secret-project-root")


@pytest.fixture(scope="module")
def server(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    srv = HttpServer(tree, serve_env(tmp_path_factory.mktemp("serve"))).start()
    yield srv
    log = srv.stop()
    assert "Traceback" not in log, log


async def first_cursor(server: HttpServer, args: dict[str, Any] | None = None) -> str:
    async with server.client(timeout=120) as c:
        page = structured(await c.call_tool("regex_search", args or {"pattern": "needle", "page_size": 10}))
    cursor: str = page["pagination"]["next_cursor"]
    return cursor


async def serves_page_2(server: HttpServer, cursor: str) -> None:
    async with server.client(timeout=120) as c:
        page = structured(await c.call_tool("regex_search", {"cursor": cursor}))
    assert page["pagination"]["offset"] == 10 and page["results"]["count"] == 10


# -- 1. decompression bombs --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["signed-format", "sealed-format"])
async def test_a_decompression_bomb_cursor_is_refused_without_growing_the_server(
    server: HttpServer, shape: str
) -> None:
    genuine = await first_cursor(server)
    bomb = signed_format_bomb() if shape == "signed-format" else sealed_format_bomb(genuine)
    assert len(bomb) < 200_000  # well inside the 4 MiB request cap
    assert server.proc is not None
    async with server.client(timeout=120) as c:
        with PeakRssGrowth(server.proc.pid) as rss:
            message = await refused_async(c, "regex_search", {"cursor": bomb})
    assert "cursor" in message.lower()
    assert rss.growth_bytes < MAX_GROWTH, f"peak RSS grew {rss.growth_bytes / MB:.0f} MB on a {len(bomb)}-char cursor"
    await serves_page_2(server, genuine)


@pytest.mark.slow
async def test_a_decompression_bomb_dataset_cursor_is_refused_without_growing_the_proxy(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--threshold-tokens", "2000", "--", sys.executable, BACKEND]
    proxy = HttpServer(tmp_path, serve_env(tmp_path), extra_args=args, subcommand=["proxy"]).start()
    try:
        async with proxy.client(timeout=120) as c:
            dataset_id = structured(await c.call_tool("records", {"n": 2000}))["dataset"]["id"]
            first = structured(await c.call_tool("read-dataset-page", {"dataset_id": dataset_id, "page_size": 10}))
            genuine = first["pagination"]["next_cursor"]
            assert proxy.proc is not None
            for bomb in (signed_format_bomb(), sealed_format_bomb(genuine)):
                with PeakRssGrowth(proxy.proc.pid) as rss:
                    await refused_async(c, "read-dataset-page", {"dataset_id": dataset_id, "cursor": bomb})
                assert rss.growth_bytes < MAX_GROWTH, f"peak RSS grew {rss.growth_bytes / MB:.0f} MB"
            page2 = structured(await c.call_tool("read-dataset-page", {"dataset_id": dataset_id, "cursor": genuine}))
            assert page2["results"]["records"][0]["id"] == 10
    finally:
        log = proxy.stop()
    assert "Traceback" not in log, log


@pytest.mark.slow
async def test_an_absurdly_long_cursor_is_refused_up_front(server: HttpServer) -> None:
    genuine = await first_cursor(server)
    huge = genuine + "A" * (3 * MB)  # valid alphabet, fits the 4 MiB request cap
    assert server.proc is not None
    async with server.client(timeout=120) as c:
        with PeakRssGrowth(server.proc.pid) as rss:
            message = await refused_async(c, "regex_search", {"cursor": huge})
    assert "too long" in message and f"{len(huge):,}" in message, message
    assert rss.growth_bytes < MAX_GROWTH
    await serves_page_2(server, genuine)


# -- 2. a cursor's root against this server's roots --------------------------------------------


@pytest.mark.slow
async def test_a_cursor_from_a_server_rooted_elsewhere_is_refused(tmp_path: Path) -> None:
    """Two servers of one user share the default key file (cursor.key in the cache dir): the
    cursor of the one rooted at A must not make the one rooted at B search A."""
    a_root = write_code_tree(tmp_path / "a")
    b_root = tmp_path / "b"
    b_root.mkdir()
    (b_root / "notes.py").write_text("nothing to see\n")
    env = serve_env(tmp_path, secret=None)  # same cache dir, so the same generated key
    a = HttpServer(a_root, env).start()
    try:
        cursor = await first_cursor(a)
    finally:
        a.stop()
    b = HttpServer(b_root, env).start()
    try:
        async with b.client(timeout=120) as c:
            message = await refused_async(c, "regex_search", {"cursor": cursor})
    finally:
        log = b.stop()
    assert "outside the allowed roots" in message and str(b_root.resolve()) in message, message
    assert "Traceback" not in log, log


# -- 3. search parameters sent with a cursor ---------------------------------------------------

FIRST = {"pattern": "needle", "page_size": 10, "include_patterns": ["*.py"], "ignore_case": True}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sent", "named"),
    [
        ({"path": "lib"}, "path"),
        ({"pattern": "return"}, "pattern"),
        ({"ignore_case": False}, "ignore_case"),  # sent at its default, still not the cursor's
        ({"whole_word": True}, "whole_word"),
        ({"context_lines": 2}, "context_lines"),
        ({"include_patterns": ["*.md"]}, "include_patterns"),
        ({"exclude_patterns": ["lib/**"]}, "exclude_patterns"),
        ({"jq_filter": 'map(select(.path | startswith("lib/")))'}, "jq_filter"),
    ],
)
async def test_a_search_parameter_that_differs_from_the_cursors_is_refused(
    server: HttpServer, sent: dict[str, Any], named: str
) -> None:
    cursor = await first_cursor(server, FIRST)
    async with server.client(timeout=120) as c:
        message = await refused_async(c, "regex_search", {"cursor": cursor, **sent})
    assert f"`{named}`" in message and "only the cursor" in message, message


@pytest.mark.slow
async def test_equal_search_parameters_and_presentation_options_are_accepted_with_a_cursor(server: HttpServer) -> None:
    cursor = await first_cursor(server, FIRST)
    async with server.client(timeout=120) as c:
        same = structured(await c.call_tool("regex_search", {"cursor": cursor, **FIRST}))
        partial = structured(await c.call_tool("regex_search", {"cursor": cursor, "pattern": "needle", "path": "."}))
        presented = structured(
            await c.call_tool(
                "regex_search",
                {
                    "cursor": cursor,
                    "page_size": 5,
                    "snippet_length": 0,
                    "output_mode": "inline",
                    "max_output_tokens": 2000,
                    "stats": "first",
                    "include_patterns": None,
                    "jq_filter": None,
                    "detail": "full",
                },
            )
        )
    assert same["pagination"]["offset"] == partial["pagination"]["offset"] == presented["pagination"]["offset"] == 10
    assert same["results"]["count"] == 10 and presented["results"]["count"] == 5
    assert "content" not in presented["results"]["matches"][0]["match"] and "stats" in presented["results"]


# -- 4. readable cursors -----------------------------------------------------------------------


def everything_readable(cursor: str) -> bytes:
    """What anyone holding the cursor can read without a key: every base64 run decoded at every
    alignment, and whatever inflates (zlib or raw deflate) from any of its first 64 bytes."""
    found = [cursor.encode()]
    for segment in cursor.split("."):
        for shift in range(4):
            text = segment[shift:]
            try:
                raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            except (binascii.Error, ValueError):
                continue
            found.append(raw)
            for start in range(min(64, len(raw))):
                for wbits in (15, -15):
                    inflater = zlib.decompressobj(wbits)
                    with contextlib.suppress(zlib.error):
                        found.append(inflater.decompress(raw[start:], 1 << 20))
    return b"\n".join(found)


@pytest.mark.slow
async def test_a_cursor_reveals_neither_the_root_nor_the_search(server: HttpServer, tree: Path) -> None:
    cursor = await first_cursor(server, {"pattern": "needle_7_", "page_size": 5})
    readable = everything_readable(cursor)
    for secret in (str(tree.resolve()), "secret-project-root", "needle_7_"):
        assert secret.encode() not in readable and json.dumps(secret).encode() not in readable, secret
