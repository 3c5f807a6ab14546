"""Chunked stdio over real pipes: a FastMCP server subprocess, our client transport, fastmcp's
plain stdio on either side for interoperability, and raw bytes for what a bad peer can send."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp import MCPError

from harness.chunked_server import blob_text
from harness.commands import codepager_cmd
from harness.patched import patched_codepager_cmd
from harness.results import text_of
from server.settings import ServerSettings, load_settings
from server.transports.chunked_client import ChunkedStdioTransport
from server.transports.framing import DEFAULT_CHUNK_LIMIT, FramingOptions, Reassembler, encode_message, parse_frame
from server.transports.run import framing_options
from server.transports.wire import Refused, TooLarge
from tests.server_helpers import page_matches, serve_env, structured

FIXTURE = ["-m", "harness.chunked_server"]
ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000


def _text(result: Any) -> str:
    assert not result.is_error, result
    return text_of(result.content[0])


@pytest.mark.slow
async def test_five_megabyte_result_and_request_intact_through_a_subprocess(tmp_path: Path) -> None:
    # `tee` records what the client really writes on the server's stdin.
    sent = tmp_path / "client-to-server.bin"
    command = f'tee "$0" | exec "{sys.executable}" -m harness.chunked_server chunked'
    async with Client(ChunkedStdioTransport("/bin/sh", ["-c", command, str(sent)], cwd=str(ROOT))) as client:
        assert _text(await client.call_tool("blob", {"size": 5 * MB})) == blob_text(5 * MB)
        payload = blob_text(MB)[::-1]
        assert _text(await client.call_tool("echo", {"text": payload})) == payload
        # A tool printing to stdout lands on stderr; the wire stays intact.
        assert _text(await client.call_tool("noisy", {})) == "still framed"
        assert _text(await client.call_tool("blob", {"size": 10})) == blob_text(10)
    lines = sent.read_bytes().splitlines()
    framed = [line for line in lines if not line.startswith(b"{")]
    assert len(framed) > 1 and all(len(parse_frame(line).data) <= DEFAULT_CHUNK_LIMIT for line in framed)
    assert max(len(line) for line in lines) < 64 * 1024


@pytest.mark.slow
async def test_chunking_client_talks_to_a_plain_stdio_server_for_small_messages() -> None:
    async with Client(ChunkedStdioTransport(sys.executable, [*FIXTURE, "plain"])) as client:
        assert _text(await client.call_tool("blob", {"size": 1000})) == blob_text(1000)
        assert _text(await client.call_tool("echo", {"text": "héllo 🚀"})) == "héllo 🚀"
        # A plain server's large answer is one long line, which the chunking reader accepts.
        assert _text(await client.call_tool("blob", {"size": 300_000})) == blob_text(300_000)


@pytest.mark.slow
async def test_plain_stdio_client_talks_to_a_chunking_server_for_small_messages() -> None:
    async with Client(StdioTransport(sys.executable, [*FIXTURE, "chunked"])) as client:
        assert {tool.name for tool in await client.list_tools()} >= {"blob", "echo"}
        assert _text(await client.call_tool("blob", {"size": 1000})) == blob_text(1000)
        assert _text(await client.call_tool("echo", {"text": "héllo 🚀"})) == "héllo 🚀"


class _Wire:
    """Raw JSON-RPC over a server subprocess's pipes, recording the lines each answer came on."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._reassembler = Reassembler()

    async def send(self, *lines: bytes) -> None:
        for line in lines:
            await self._stdin.send(line if line.endswith(b"\n") else line + b"\n")

    async def answer(self, request_id: int) -> tuple[dict[str, Any], list[bytes]]:
        lines: list[bytes] = []
        with anyio.fail_after(30):
            while True:
                line = await self._stdout.receive_until(b"\n", 64 * MB)
                lines.append(line)
                message = self._reassembler.feed(line)
                assert not isinstance(message, (TooLarge, Refused)), message
                if message is not None and json.loads(message).get("id") == request_id:
                    return json.loads(message), lines


def _request(request_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, ensure_ascii=False)


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> str:
    return _request(request_id, "tools/call", {"name": tool, "arguments": arguments})


@pytest.mark.slow
async def test_server_refuses_bad_frames_and_keeps_serving() -> None:
    process = await anyio.open_process([sys.executable, *FIXTURE, "chunked"])  # default limit; stderr piped
    async with process:
        wire = _Wire(process)
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        await wire.send(
            _request(1, "initialize", init).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        )
        answer, lines = await wire.answer(1)
        assert answer["result"]["serverInfo"]["name"] == "chunked-fixture" and len(lines) == 1

        payload = blob_text(100_000)  # ~150 KB of UTF-8: framed both ways
        frames = encode_message(_call(2, "echo", {"text": payload}), 4096)  # each side picks its own limit
        first = parse_frame(frames[0][:-1])
        await wire.send(
            frames[0],
            b"deadbeef is not a frame",  # a hex digit first: a frame, refused (other lines go to JSON-RPC)
            f"{first.message_id}:0:{first.total}:".encode() + b"X" * len(first.data),  # duplicate, other data
            f"{first.message_id}:1:{first.total + 1}:zz".encode(),  # totalChunks changes
            f"{first.message_id}:{first.total}:{first.total}:zz".encode(),  # index out of range
            *reversed(frames[1:]),  # and the rest out of order
        )
        answer, lines = await wire.answer(2)
        assert answer["result"]["content"][0]["text"] == payload
        # The answer was framed by the server at its default limit, each line under a 64 KiB pipe buffer.
        assert len(lines) > 1 and all(len(line) < 64 * 1024 for line in lines)
        assert max(len(parse_frame(line).data) for line in lines) == DEFAULT_CHUNK_LIMIT

        await wire.send(_call(3, "blob", {"size": 10}).encode())
        answer, lines = await wire.answer(3)
        assert answer["result"]["content"][0]["text"] == blob_text(10) and len(lines) == 1

        assert process.stdin is not None and process.stderr is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()
            stderr = b"".join([chunk async for chunk in process.stderr]).decode()
    for reason in ("malformed frame header", "duplicate chunk 0", "totalChunks changed", "out of range"):
        assert reason in stderr, stderr


@pytest.mark.slow
async def test_codepager_serve_chunked_returns_a_five_megabyte_page_intact(tmp_path: Path) -> None:
    """The real `codepager serve --transport chunked-stdio`, one inline page of 4,000 long
    multi-byte matches (over 5 MB as text), every match checked against the files."""
    root = tmp_path / "tree"
    root.mkdir()
    lines = {}
    for i in range(8):
        text = [f"needle_{i}_{j} = '{'é中🚀x' * 110}'" for j in range(500)]
        (root / f"mod{i}.py").write_text("\n".join(text) + "\n", encoding="utf-8")
        lines.update({(f"mod{i}.py", j + 1): line for j, line in enumerate(text)})
    env = serve_env(tmp_path, offload__max_tokens=str(10**9))
    # the byte ceiling of an answer (the layer's, and the one of a client without its own) and
    # the largest page are constants: raised for this server only
    cmd, args = patched_codepager_cmd(
        {
            "server.output.layer.MAX_ANSWER_BYTES": 10**9,
            "server.clients.MAX_ANSWER_BYTES": 10**9,
            "sessions.pager.MAX_PAGE_SIZE": 4000,
        }
    )
    serve = [cmd, *args, "serve", "--root", str(root), "--transport", "chunked-stdio"]
    received = tmp_path / "server-to-client.bin"  # `tee` records what the server really writes
    transport = ChunkedStdioTransport(
        "/bin/sh", ["-c", '"$@" | tee "$0"', str(received), *serve], env=env, cwd=str(root)
    )
    async with Client(transport) as client:
        result = await client.call_tool(
            "regex_search", {"pattern": "needle", "page_size": 4000, "output_mode": "inline"}
        )
    answer = json.dumps(result.structured_content, ensure_ascii=False) + result.content[0].text  # both blocks
    assert len(answer.encode()) > 5 * MB
    wire = received.read_bytes().splitlines()
    assert max(len(line) for line in wire) < 64 * 1024
    assert sum(1 for line in wire if not line.startswith(b"{")) > 5 * MB // DEFAULT_CHUNK_LIMIT
    matches = page_matches(structured(result))
    assert len(matches) == len(lines) == 4000
    for match in matches:
        assert match["text"] == lines[(match["path"], match["line"])]


def test_reassembly_settings_default_to_30_s_and_64_mib_and_are_configurable(tmp_path: Path, monkeypatch) -> None:
    defaults = framing_options(ServerSettings())
    assert (defaults.timeout_s, defaults.max_buffered_bytes) == (30.0, 64 * 1024 * 1024)
    assert (defaults.chunk_limit, defaults.max_message_bytes) == (DEFAULT_CHUNK_LIMIT, 4 * 1024 * 1024)
    assert (defaults.max_partial_messages, defaults.max_frames_per_message) == (64, 32 * 1024)
    library = FramingOptions()
    assert (defaults.timeout_s, defaults.max_buffered_bytes) == (library.timeout_s, library.max_buffered_bytes)
    assert (defaults.max_partial_messages, defaults.max_frames_per_message) == (
        library.max_partial_messages,
        library.max_frames_per_message,
    )
    toml = tmp_path / "codepager.toml"
    toml.write_text("[server]\nrequest_timeout_s = 2.5\n")
    monkeypatch.setattr("server.transports.framing.DEFAULT_MAX_BUFFERED_BYTES", 2**21)  # a constant, read at start
    monkeypatch.setenv("CODEPAGER_SERVER__MAX_REQUEST_BYTES", "1048576")
    configured = framing_options(load_settings(toml).server)
    assert (configured.timeout_s, configured.max_buffered_bytes, configured.max_message_bytes) == (2.5, 2**21, 2**20)


@pytest.mark.slow
async def test_an_incomplete_message_is_dropped_on_an_idle_stream(tmp_path: Path) -> None:
    """No traffic after the first frame: the configured 0.5 s timeout still drops the message."""
    cmd, args = codepager_cmd()
    env = serve_env(tmp_path, server__request_timeout_s="0.5")
    serve = [cmd, *args, "serve", "--root", str(tmp_path), "--transport", "chunked-stdio"]
    process = await anyio.open_process(serve, env=env)
    async with process:
        assert process.stdin is not None and process.stderr is not None
        wire = _Wire(process)
        frames = encode_message(_call(2, "regex_search", {"pattern": "x" * 500}), 128)
        await wire.send(frames[0])
        log = b""
        with anyio.fail_after(30):
            while b"dropped incomplete message" not in log:
                log += await process.stderr.receive()
        assert b"no chunk arrived for 0.5 s" in log
        # Its late frames are ignored; the server goes on serving.
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        await wire.send(*frames[1:], _request(1, "initialize", init).encode())
        answer, _ = await wire.answer(1)
        assert answer["result"]["serverInfo"]["name"]
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("server", ["plain", "chunked"])
async def test_client_discards_a_response_over_its_limit_and_fails_that_call(server: str) -> None:
    """A plain server sends 3 MB as one line, a chunked one as frames: either way the client
    never holds more than its limit, the call fails at once and the connection goes on."""
    transport = ChunkedStdioTransport(sys.executable, [*FIXTURE, server], framing=FramingOptions(max_message_bytes=MB))
    async with Client(transport) as client:
        with anyio.fail_after(30), pytest.raises(MCPError, match=f"over this client's limit of {MB} bytes"):
            await client.call_tool("blob", {"size": MB})
        assert _text(await client.call_tool("blob", {"size": 1000})) == blob_text(1000)


@pytest.mark.slow
async def test_codepager_proxy_over_chunked_stdio_returns_a_large_result_intact(tmp_path: Path) -> None:
    """`codepager proxy --transport chunked-stdio` in front of a plain stdio backend: a result
    and a request far above the chunk limit cross the proxy intact, framed on the client side."""
    cmd, args = codepager_cmd()
    env = serve_env(tmp_path, proxy__threshold_tokens=str(10**9), proxy__data_dir=str(tmp_path / "data"))
    proxy = [cmd, *args, "proxy", "--transport", "chunked-stdio", "--", sys.executable, *FIXTURE, "plain"]
    received = tmp_path / "proxy-to-client.bin"
    transport = ChunkedStdioTransport(
        "/bin/sh", ["-c", '"$@" | tee "$0"', str(received), *proxy], env=env, cwd=str(ROOT)
    )
    async with Client(transport) as client:
        assert _text(await client.call_tool("blob", {"size": 300_000})) == blob_text(300_000)
        payload = blob_text(200_000)[::-1]
        assert _text(await client.call_tool("echo", {"text": payload})) == payload
    wire = received.read_bytes().splitlines()
    assert max(len(line) for line in wire) < 64 * 1024
    assert sum(1 for line in wire if not line.startswith(b"{")) > 300_000 // DEFAULT_CHUNK_LIMIT


@pytest.mark.slow
async def test_client_refuses_a_response_in_more_frames_than_it_allows_and_fails_that_call() -> None:
    """The reassembly caps bind the client too: a server framing at 100 bytes sends a 5,000-character
    answer in over 100 frames; a client allowing 30 per message refuses it at its first frame,
    the call fails at once with the reason, and the connection goes on."""
    framing = FramingOptions(max_frames_per_message=30)
    async with Client(ChunkedStdioTransport(sys.executable, [*FIXTURE, "chunked", "100"], framing=framing)) as client:
        with anyio.fail_after(30), pytest.raises(MCPError, match="over the limit of 30 frames per message"):
            await client.call_tool("blob", {"size": 5000})
        assert _text(await client.call_tool("blob", {"size": 20})) == blob_text(20)
