"""Chunked stdio framing: split large JSON-RPC messages into bounded lines and put them back.

Why: some stdio pipes and clients choke on a single line far above 64 KB (the macOS pipe
buffer), and a code-search page or a proxied tool result can be megabytes. A message longer
than the chunk limit is written as frames, one per line::

    {messageId}:{chunkIndex}:{totalChunks}:{data}\\n

messageId is a UUID4, chunkIndex is zero-based and data is a slice of the message's UTF-8
bytes, cut only on character boundaries so every line is valid UTF-8 on its own. Messages at or
under the limit stay plain newline-delimited JSON, so a framing peer still talks to a plain
one for small messages. The two kinds cannot be confused: a JSON message line starts with
`{` or `[`, a frame line with a hexadecimal UUID.

This module is pure (bytes in, bytes out, an injectable clock): the transports in
`chunked_stdio` (server) and `chunked_client` (client) only move its lines over pipes.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from server.transports.wire import HEAD_BYTES, Refused, TooLarge

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_LIMIT = 60 * 1024
"""Bytes of message data per frame: under the 64 KiB macOS pipe buffer once the ~50-byte
header and newline are added. Not a setting (it was `server.chunk_limit`): the pipe buffer is
why, and readers take frames of any size, so no peer needs it changed."""

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024
"""What all messages still arriving may hold together, on the server's chunked-stdio and HTTP
transports alike. Not a setting (it was `server.max_buffered_request_bytes`): 16 requests of
the largest default size (`server.max_request_bytes`, the knob a user holds, at most this)
while bounding what a flood of slow bodies costs. Read when a server starts (a test's server
patches it here)."""
# How many incomplete messages one end holds from its peer, and how many frames one message
# may claim. Not settings (they were, and nobody set them): the byte budget above already
# bounds the memory they cost, and these only have to hold every honest message (one at a
# time from an MCP client, in at most ~70 frames of 60 KiB) while bounding a hostile peer's
# bookkeeping; tests build `FramingOptions` with smaller ones.
DEFAULT_MAX_PARTIAL_MESSAGES = 64
DEFAULT_MAX_FRAMES_PER_MESSAGE = 32 * 1024
"""A whole 4 MiB request in frames averaging 128 bytes; the default 60 KiB frames need 70."""

FRAME_OVERHEAD = 128
"""What one held chunk costs beyond its data, counted against `max_buffered_bytes`: in CPython
its dict slot, int key and bytes object take ~120 bytes, so a flood of empty frames is paid for
instead of free."""

MAX_FRAME_HEADER = 36 + 1 + 9 + 1 + 9 + 1
"""The longest `{uuid}:{index}:{total}:` a frame can start with (the parser allows 9 digits)."""

MIN_CHUNK_LIMIT = 4
"""The longest UTF-8 sequence is 4 bytes; a smaller limit could not hold every character."""

_MAX_TOMBSTONES = 4096
"""Ids of dropped messages remembered so their late frames are ignored; bounded so a peer that
keeps abandoning messages cannot grow the set without end."""

_FRAME_HEADER = re.compile(
    rb"(?P<id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    rb":(?P<index>[0-9]{1,9}):(?P<total>[0-9]{1,9}):"
)
_FRAME_STARTS = frozenset(b"0123456789abcdefABCDEF")
_LEADING_WHITESPACE = b" \t\r"


def validate_chunk_limit(chunk_limit: int) -> int:
    """Refuse a limit that cannot carry every UTF-8 character; return it unchanged otherwise."""
    if chunk_limit < MIN_CHUNK_LIMIT:
        raise ValueError(
            f"chunk limit must be at least {MIN_CHUNK_LIMIT} bytes (one UTF-8 character), got {chunk_limit}"
        )
    return chunk_limit


@dataclass(frozen=True)
class FramingOptions:
    """The knobs of one end of a chunked connection, checked once when built.

    `chunk_limit` is what this end sends (bytes of data per frame; a message at or under it
    goes as one plain line); the others bound what it will buffer from the peer, whose
    frames may be of any size: `max_message_bytes` for one message (a longer one is refused
    as `TooLarge`, its lines never held whole), `max_frames_per_message` for the frames one
    message may claim, `max_partial_messages` for incomplete messages at once,
    `max_buffered_bytes` for all incomplete messages together (each frame counting its data
    plus `FRAME_OVERHEAD`), `timeout_s` of silence before an incomplete message is dropped.
    `limit_setting` names, in errors, what the limit is (a constant of the proxy, or the field).
    """

    chunk_limit: int = DEFAULT_CHUNK_LIMIT
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    max_message_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    max_partial_messages: int = DEFAULT_MAX_PARTIAL_MESSAGES
    max_frames_per_message: int = DEFAULT_MAX_FRAMES_PER_MESSAGE
    limit_setting: str = "FramingOptions.max_message_bytes"

    def __post_init__(self) -> None:
        validate_chunk_limit(self.chunk_limit)
        if self.timeout_s <= 0:
            raise ValueError(f"reassembly timeout must be positive, got {self.timeout_s}")
        for name in ("max_buffered_bytes", "max_message_bytes", "max_partial_messages", "max_frames_per_message"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    @property
    def max_line_bytes(self) -> int:
        """The longest line worth holding: a whole message, or a frame carrying all of one."""
        return self.max_message_bytes + MAX_FRAME_HEADER

    def encode(self, message: str) -> bytes:
        """The wire bytes of one message: frames back to back, so one write sends them all."""
        return b"".join(encode_message(message, self.chunk_limit))


def split_utf8(data: bytes | memoryview, limit: int) -> list[memoryview]:
    """Cut `data` into slices of at most `limit` bytes, never inside a multi-byte character.

    A cut that would land on a continuation byte (0b10xxxxxx) moves back to the start of that
    character, so each slice of valid UTF-8 decodes on its own. Bytes that are not UTF-8 have
    no boundary to respect and are cut at the limit. The slices are views: a 10 MB message is
    not copied to be cut.
    """
    validate_chunk_limit(limit)
    view = memoryview(data)
    slices: list[memoryview] = []
    start = 0
    while start < len(view):
        end = min(start + limit, len(view))
        cut = end
        while start < cut < len(view) and view[cut] & 0xC0 == 0x80:
            cut -= 1
        if cut == start:
            cut = end
        slices.append(view[start:cut])
        start = cut
    return slices


def encode_message(message: str, chunk_limit: int = DEFAULT_CHUNK_LIMIT) -> list[bytes]:
    """Return the newline-terminated lines that carry one JSON message on the wire.

    At or under `chunk_limit` bytes the message is one plain line; above it, one frame per
    slice under a fresh UUID4. `message` may already end with its line's newline (mcp's stdio
    server hands its writer `json + "\n"`): accepting it spares a copy of a large string.
    """
    data = message.encode("utf-8")
    size = len(data) - 1 if data.endswith(b"\n") else len(data)
    if data.find(b"\n", 0, size) != -1:
        raise ValueError("a JSON-RPC message on stdio must not contain a raw newline; serialize it compactly")
    if size <= validate_chunk_limit(chunk_limit):
        return [data if size < len(data) else data + b"\n"]
    slices = split_utf8(memoryview(data)[:size], chunk_limit)
    message_id = str(uuid.uuid4()).encode()
    total = len(slices)
    return [b"%s:%d:%d:%s\n" % (message_id, index, total, piece) for index, piece in enumerate(slices)]


class FrameRejected(ValueError):
    """One incoming line was refused; the connection goes on."""


@dataclass(frozen=True)
class Frame:
    message_id: str
    index: int
    total: int
    data: bytes


def parse_frame(line: bytes) -> Frame:
    """Parse one frame line (without its newline), or say why it is not a valid frame."""
    header = _FRAME_HEADER.match(line)
    if header is None:
        raise FrameRejected(
            f"malformed frame header in line starting {line[:60]!r}: expected JSON (starting with '{{' or '[') "
            "or '<uuid>:<chunkIndex>:<totalChunks>:<data>'"
        )
    index, total = int(header["index"]), int(header["total"])
    message_id = header["id"].decode("ascii").lower()
    if total < 1:
        raise FrameRejected(f"malformed frame header for message {message_id}: totalChunks must be at least 1")
    if index >= total:
        raise FrameRejected(f"chunk index {index} out of range for message {message_id} of {total} chunks")
    return Frame(message_id, index, total, line[header.end() :])


@dataclass
class _Partial:
    """The chunks received so far of one framed message."""

    total: int
    last_seen: float
    chunks: dict[int, bytes] = field(default_factory=dict)
    size: int = 0

    @property
    def cost(self) -> int:
        """What it counts against the reassembly buffer: its data and a fixed cost per chunk."""
        return self.size + FRAME_OVERHEAD * len(self.chunks)


class Reassembler:
    """Turn the lines of one incoming stream back into whole JSON messages.

    Plain lines pass straight through; frames (lines starting with a hexadecimal digit) are
    buffered per messageId, so frames of several messages may interleave and chunks may come in
    any order. A plain line need not be JSON: judging it is the JSON-RPC layer's job, which
    answers it as on plain stdio. A bad frame is refused with a logged error and the stream goes
    on: the peer's other messages are not its fault.

    Memory is bounded by what arrived, never by what a header claims (`FramingOptions`), so a
    broken or hostile peer cannot exhaust it: a message over `max_message_bytes` is refused as
    `TooLarge` (a plain line, or a framed message as soon as its chunks pass the cap), and one
    claiming more than `max_frames_per_message` frames, starting while `max_partial_messages`
    are incomplete, or whose frame would push the buffer (data plus `FRAME_OVERHEAD` a chunk)
    over `max_buffered_bytes`, is dropped as `Refused`; the caller answers both. A partial
    message idle for `timeout_s` is dropped (idle rather than age, so a large message that
    arrives slowly but steadily is not cut off). A dropped message's id is remembered for a
    while so its late frames are discarded instead of starting a buffer that could never
    complete. Expiry runs whenever a line arrives and whenever the caller calls `expire`,
    which an idle stream needs (see `chunked_stdio.expire_idle_messages`); it costs O(1)
    amortised, since the timeout is the same for every message and partials are kept in order
    of last activity.
    """

    def __init__(self, options: FramingOptions | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        options = options or FramingOptions()
        self._options = options
        self._clock = clock
        self._partials: OrderedDict[str, _Partial] = OrderedDict()  # least recently active first
        self._dropped: OrderedDict[str, float] = OrderedDict()  # earliest dropped first
        self._buffered_bytes = 0

    @property
    def buffered_bytes(self) -> int:
        """What incomplete messages count against `max_buffered_bytes`: their data plus
        `FRAME_OVERHEAD` per chunk held."""
        return self._buffered_bytes

    @property
    def pending_messages(self) -> int:
        """How many framed messages are waiting for more chunks (at most `max_partial_messages`)."""
        return len(self._partials)

    def feed(self, line: bytes | TooLarge) -> bytes | TooLarge | Refused | None:
        """Take one line (with or without its newline, or the `TooLarge` a `LineSplitter` made of
        an over-long one); return a complete message, a refused one, or None."""
        self.expire()
        if isinstance(line, TooLarge):
            return self._too_long(line)
        if line.endswith(b"\n"):
            line = line[:-1]
        content = line.lstrip(_LEADING_WHITESPACE)
        if not content:
            return None
        if content[0] not in _FRAME_STARTS:
            if len(content) > self._options.max_message_bytes:
                return TooLarge(len(content), self._options.max_message_bytes, content[:HEAD_BYTES])
            return line
        try:
            return self._accept(parse_frame(line))
        except FrameRejected as rejected:
            logger.error("chunked stdio: rejected a frame: %s", rejected)
            return None

    def expire(self) -> float:
        """Drop partial messages idle for the timeout; return the seconds until the next one
        could expire (the timeout itself when none is pending).

        Only the messages that expire, and the first that does not, are looked at: `_partials`
        is ordered by last activity and `_dropped` by time of drop."""
        now = self._clock()
        timeout = self._options.timeout_s
        while self._partials:
            message_id, partial = next(iter(self._partials.items()))
            if now - partial.last_seen < timeout:
                break
            self._drop(message_id, f"no chunk arrived for {timeout:g} s", now)
        while self._dropped and now - next(iter(self._dropped.values())) > timeout:
            self._dropped.popitem(last=False)
        if not self._partials:
            return timeout
        return next(iter(self._partials.values())).last_seen + timeout - now

    def _too_long(self, line: TooLarge) -> TooLarge | None:
        """An over-long line, discarded as it streamed: a message too large, or a frame of one."""
        content = line.head.lstrip(_LEADING_WHITESPACE)
        if content[:1] and content[0] not in _FRAME_STARTS:
            return TooLarge(line.size, self._options.max_message_bytes, content)
        try:
            frame = parse_frame(line.head)
        except FrameRejected as rejected:
            logger.error("chunked stdio: rejected an over-long line of %d bytes: %s", line.size, rejected)
            return None
        if frame.message_id in self._dropped:
            return None
        return self._too_large(frame, line.size)

    def _too_large(self, frame: Frame, size: int) -> TooLarge:
        """Drop `frame`'s message for passing the size cap, as a `TooLarge` of at least `size` bytes."""
        limit = self._options.max_message_bytes
        refusal = TooLarge(size, limit, self._head(frame))
        self._drop(frame.message_id, f"it passed the cap of {limit} bytes per message", self._clock())
        return refusal

    def _refuse(self, frame: Frame, reason: str) -> Refused:
        """Drop `frame`'s message for passing a reassembly limit other than its size."""
        refusal = Refused(f"framed message dropped: {reason}", self._head(frame))
        self._drop(frame.message_id, reason, self._clock())
        return refusal

    def _head(self, frame: Frame) -> bytes:
        """The first bytes of `frame`'s message (where its id is), as far as its chunks from the
        first on are known without a gap, `frame` included; at most `HEAD_BYTES`."""
        partial = self._partials.get(frame.message_id)
        chunks = partial.chunks if partial is not None else {}
        head = b""
        for index in range(frame.total):
            data = frame.data if index == frame.index else chunks.get(index)
            if data is None or len(head) >= HEAD_BYTES:
                break
            head += data[: HEAD_BYTES - len(head)]
        return head

    def _start_refusal(self, frame: Frame) -> str | None:
        """Why a frame of a message not seen before may not start one (None: it may). Judged
        on the claim only to refuse it: nothing is allocated by `totalChunks`."""
        options = self._options
        if frame.total > options.max_frames_per_message:
            return (
                f"it claims {frame.total} frames, over the limit of {options.max_frames_per_message} "
                "frames per message; send it in fewer, larger frames"
            )
        if frame.total > 1 and self.pending_messages >= options.max_partial_messages:
            return (
                f"{options.max_partial_messages} framed messages are already incomplete, the most held at once; "
                "send the rest of those before starting another"
            )
        return None

    def _accept(self, frame: Frame) -> bytes | TooLarge | Refused | None:
        now = self._clock()
        if frame.message_id in self._dropped:
            logger.debug("chunked stdio: ignoring late chunk %d of dropped message %s", frame.index, frame.message_id)
            return None
        partial = self._partials.get(frame.message_id)
        if partial is None:
            if (reason := self._start_refusal(frame)) is not None:
                return self._refuse(frame, reason)
            partial = _Partial(total=frame.total, last_seen=now)
        elif partial.total != frame.total:
            raise FrameRejected(
                f"totalChunks changed from {partial.total} to {frame.total} within message {frame.message_id}"
            )
        elif (known := partial.chunks.get(frame.index)) is not None:
            if known != frame.data:
                raise FrameRejected(f"duplicate chunk {frame.index} of message {frame.message_id} with different data")
            return None
        if partial.size + len(frame.data) > self._options.max_message_bytes:
            return self._too_large(frame, partial.size + len(frame.data))
        cost = len(frame.data) + FRAME_OVERHEAD
        if self._buffered_bytes + cost > self._options.max_buffered_bytes:
            return self._refuse(
                frame,
                f"it would push the frames held for incomplete messages over {self._options.max_buffered_bytes} bytes "
                f"(each counts its data plus {FRAME_OVERHEAD}); send the rest of earlier messages first, "
                "or send this one in fewer, larger frames",
            )
        partial.chunks[frame.index] = frame.data
        partial.size += len(frame.data)
        partial.last_seen = now
        self._buffered_bytes += cost
        if len(partial.chunks) < partial.total:
            self._partials[frame.message_id] = partial
            self._partials.move_to_end(frame.message_id)
            return None
        self._partials.pop(frame.message_id, None)
        self._buffered_bytes -= partial.cost
        return b"".join(partial.chunks[index] for index in range(partial.total))

    def _drop(self, message_id: str, reason: str, now: float) -> None:
        partial = self._partials.pop(message_id, None)
        received = 0
        if partial is not None:
            self._buffered_bytes -= partial.cost
            received = len(partial.chunks)
        total = f" of {partial.total}" if partial is not None else ""
        logger.error(
            "chunked stdio: dropped incomplete message %s (%d%s chunks received): %s",
            message_id,
            received,
            total,
            reason,
        )
        self._dropped[message_id] = now
        self._dropped.move_to_end(message_id)
        while len(self._dropped) > _MAX_TOMBSTONES:
            self._dropped.popitem(last=False)
