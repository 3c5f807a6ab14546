"""Line plumbing shared by every stdio transport and the chunked client: bounded line reading
and what is known of a message refused for its size (or, when framed, for another limit).

Why bounded: a peer can send one line of any length. Buffering it whole before any size check
would let a single 1 GB line take 1 GB (or more, once decoded) of memory. `LineSplitter`
holds at most `max_line_bytes` of a line; past that it keeps only the line's first bytes and
its length, discarding the rest as it streams, and reports a `TooLarge` when the line ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

HEAD_BYTES = 4096
"""First bytes kept of a refused message: enough for its JSON-RPC id (or a frame header)."""

READ_SIZE = 64 * 1024
"""Bytes asked of the OS per read."""

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_KEY_COLON = re.compile(r"\s*:\s*")


@dataclass(frozen=True)
class TooLarge:
    """A message refused for its size: at least `size` bytes against `limit`; `head` is its
    first bytes (at most `HEAD_BYTES`), from which the sender's id may be read."""

    size: int
    limit: int
    head: bytes


@dataclass(frozen=True)
class Refused:
    """A framed message dropped before it was complete for passing a reassembly limit other
    than its size (frames per message, incomplete messages at once, buffered bytes): `reason`
    says which and what to do instead; `head` is its first bytes, from which the sender's id
    may be read (empty when its first chunk was never seen)."""

    reason: str
    head: bytes


class LineSplitter:
    """Split a byte stream into lines (without their newline), holding at most
    `max_line_bytes` of any line. Pure: bytes in, lines out."""

    def __init__(self, max_line_bytes: int) -> None:
        self._max = max_line_bytes
        self._pending = bytearray()
        self._overflow: int | None = None  # bytes of the current line so far, once over the bound
        self._head = b""

    @property
    def held_bytes(self) -> int:
        """Bytes of the current, unfinished line kept in memory: the line while it is within
        `max_line_bytes`, then only its first `HEAD_BYTES`."""
        return len(self._pending) + len(self._head)

    def feed(self, chunk: bytes) -> list[bytes | TooLarge]:
        """Take the next bytes of the stream; return the lines they complete."""
        lines: list[bytes | TooLarge] = []
        view = memoryview(chunk)
        start = 0
        while (newline := chunk.find(b"\n", start)) != -1:
            self._take(view[start:newline])
            lines.append(self._finish())
            start = newline + 1
        self._take(view[start:])
        return lines

    def close(self) -> bytes | TooLarge | None:
        """The last line, if the stream ended without a newline after it."""
        if self._overflow is None and not self._pending:
            return None
        return self._finish()

    def _take(self, data: memoryview) -> None:
        if self._overflow is not None:
            self._overflow += len(data)
        elif self.held_bytes + len(data) <= self._max:
            self._pending += data
        else:
            self._overflow = len(self._pending) + len(data)
            self._head = bytes((bytes(self._pending[:HEAD_BYTES]) + bytes(data[:HEAD_BYTES]))[:HEAD_BYTES])
            self._pending = bytearray()  # a fresh buffer: clear() may keep the old allocation

    def _finish(self) -> bytes | TooLarge:
        if self._overflow is not None:
            line: bytes | TooLarge = TooLarge(self._overflow, self._max, self._head)
            self._overflow, self._head = None, b""
        else:
            line = bytes(self._pending)
            self._pending = bytearray()
        return line


async def bounded_lines(chunks: AsyncIterable[bytes], max_line_bytes: int) -> AsyncIterator[bytes | TooLarge]:
    """The lines of a byte stream, each either whole (at most `max_line_bytes`) or a `TooLarge`."""
    splitter = LineSplitter(max_line_bytes)
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    last = splitter.close()
    if last is not None:
        yield last


def leading_fields(head: bytes) -> dict[str, object]:
    """The top-level keys of the JSON object that `head` begins, as far as `head` goes.

    A key maps to its value when that is a scalar wholly inside `head`, else to `...`. This is
    how an oversized message's id is recovered without parsing (or holding) the message: the
    SDKs write `jsonrpc` and `id` first. Strings are skipped whole, so an `"id"` nested in
    params or inside a string is never mistaken for the message's own.
    """
    text = head.decode("utf-8", "replace")
    if not text.lstrip().startswith("{"):
        return {}
    fields: dict[str, object] = {}
    depth = 0
    for token in _TOKEN.finditer(text):
        kind = token.group()
        if kind in "{[":
            depth += 1
        elif kind in "}]":
            depth -= 1
        elif depth == 1 and (colon := _KEY_COLON.match(text, token.end())) is not None:
            try:
                key = json.loads(kind)
            except ValueError:  # an invalid escape in the key
                continue
            try:
                value, end = json.JSONDecoder().raw_decode(text, colon.end())
            except ValueError:
                value, end = ..., 0
            cut = end >= len(text)  # a number at the very end may go on past the head
            fields.setdefault(key, ... if cut or isinstance(value, (dict, list)) else value)
    return fields


def reply_id(request_id: object) -> int | str | None:
    """`request_id` if a JSON-RPC reply can carry it (a string or integer, encodable as UTF-8),
    else None: the one rule both ends use when answering a message they refused."""
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None
    if isinstance(request_id, str) and printable(request_id) != request_id:
        return None
    return request_id


def printable(text: str) -> str:
    """Lone surrogates (valid in JSON escapes, not in UTF-8) shown as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
