"""The stdio wire read and written by the event loop (`server.transports.pipe_io`): on a pipe
or a socket, and only there; whole messages however full the pipe; the fd's blocking mode put
back afterwards. (The servers over real pipes: tests/test_server_wire.py, test_chunked_stdio.py.)"""

from __future__ import annotations

import os
import pty
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import anyio
import pytest

from server.transports.pipe_io import WireWriter, loop_fd, read_chunks

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the event loop waits on fds on POSIX only")


@pytest.fixture
def pipe() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """(read end, write end), unbuffered, as the SDK's claim hands the wire over."""
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as reader, os.fdopen(w, "wb", buffering=0) as writer:
        yield reader, writer


def test_only_pipes_and_sockets_are_served_by_the_event_loop(tmp_path: Path, pipe: tuple[BinaryIO, BinaryIO]) -> None:
    reader, writer = pipe
    assert loop_fd(reader) == reader.fileno() and loop_fd(writer) == writer.fileno()
    left, right = socket.socketpair()
    with left, right, left.makefile("rb") as wire:
        assert loop_fd(wire) == left.fileno()
    with (tmp_path / "file").open("wb") as regular:
        assert loop_fd(regular) is None  # always "ready": nothing to wait on
    controller, terminal = pty.openpty()
    try:
        with os.fdopen(terminal, "rb", buffering=0, closefd=False) as tty:
            assert loop_fd(tty) is None  # its non-blocking flag would be the shell's too
    finally:
        os.close(controller)
        os.close(terminal)


def test_a_pipe_that_is_also_stderr_keeps_the_thread_hops(pipe: tuple[BinaryIO, BinaryIO]) -> None:
    """`2>&1` into one pipe: logging writes stderr blocking, so the pipe stays blocking."""
    _, writer = pipe
    saved = os.dup(2)
    try:
        os.dup2(writer.fileno(), 2)
        assert loop_fd(writer) is None
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def test_reads_come_as_they_arrive_until_eof_and_the_mode_is_put_back(pipe: tuple[BinaryIO, BinaryIO]) -> None:
    reader, writer = pipe

    async def main() -> list[bytes]:
        chunks = []
        async for chunk in read_chunks(reader, 4):
            chunks.append(chunk)
            assert not os.get_blocking(reader.fileno())
            if chunk == b"one\n":
                writer.write(b"two\n")
                writer.close()
        return chunks

    writer.write(b"one\n")
    assert anyio.run(main) == [b"one\n", b"two\n"]
    assert os.get_blocking(reader.fileno())


def test_a_message_larger_than_the_pipe_arrives_whole_while_the_reader_is_slow(
    pipe: tuple[BinaryIO, BinaryIO],
) -> None:
    reader, writer = pipe
    message = bytes(range(256)) * 8192  # 2 MiB: many times a pipe's buffer
    received = bytearray()

    def drain() -> None:
        while data := reader.read(65536):
            received.extend(data)

    draining = threading.Thread(target=drain)
    draining.start()

    async def main() -> None:
        wire = WireWriter(writer)
        try:
            assert not os.get_blocking(writer.fileno())
            await wire.send(message)
            await wire.send(b"\n")
        finally:
            wire.close()

    anyio.run(main)
    assert os.get_blocking(writer.fileno())
    writer.close()
    draining.join(30)
    assert bytes(received) == message + b"\n"


def test_a_wire_the_event_loop_cannot_wait_on_is_written_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "out"
    with path.open("wb") as regular:

        async def main() -> None:
            wire = WireWriter(regular)
            await wire.send(b"first\n")
            await wire.send(b"second\n")
            wire.close()

        anyio.run(main)
    assert path.read_bytes() == b"first\nsecond\n"
