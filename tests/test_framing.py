"""The chunked stdio wire format: encoding, reassembly, and every way a peer can get it wrong."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.transports import framing
from server.transports.framing import (
    DEFAULT_CHUNK_LIMIT,
    FRAME_OVERHEAD,
    FramingOptions,
    Reassembler,
    encode_message,
    parse_frame,
    split_utf8,
)
from server.transports.wire import LineSplitter, Refused, TooLarge, leading_fields

# Multi-byte heavy: 2-byte Latin, 3-byte CJK, 4-byte emoji, plus ASCII and escapes.
MULTIBYTE = st.text(
    alphabet=st.sampled_from(list('aZ09 "\\\t{}[]:é ü ß 中文字 日本 🚀🧪😀👍🏽'))
    | st.characters(exclude_categories=["Cs"]),
    max_size=400,
)


def _message(text: str, request_id: int = 1) -> str:
    """A compact JSON-RPC text, as the transports serialize it (no raw newline)."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"text": text}}, ensure_ascii=False, separators=(",", ":")
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _frames(text: str, limit: int) -> list[bytes]:
    lines = encode_message(text, limit)
    assert len(lines) > 1, "the test needs a framed message"
    return lines


@given(text=MULTIBYTE, limit=st.integers(min_value=4, max_value=300), data=st.data())
def test_round_trip_in_any_order(text: str, limit: int, data: st.DataObject) -> None:
    message = _message(text)
    lines = encode_message(message, limit)
    encoded = message.encode()
    if len(encoded) <= limit:
        assert lines == [encoded + b"\n"]
    else:
        header_ids = set()
        for line in lines:
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            frame = parse_frame(line[:-1])
            header_ids.add(frame.message_id)
            assert 0 < len(frame.data) <= limit
            frame.data.decode("utf-8")  # each frame's data is whole characters
        assert len(header_ids) == 1 and uuid.UUID(header_ids.pop()).version == 4
    reassembler = Reassembler()
    shuffled = data.draw(st.permutations(lines))
    results = [reassembler.feed(line) for line in shuffled]
    assert [r for r in results if r is not None] == [encoded]
    assert results[-1] == encoded
    assert reassembler.buffered_bytes == 0 and reassembler.pending_messages == 0


@given(texts=st.lists(MULTIBYTE, min_size=2, max_size=4), limit=st.integers(min_value=4, max_value=64), data=st.data())
def test_interleaved_messages_and_plain_lines(texts: list[str], limit: int, data: st.DataObject) -> None:
    """Frames of several messages mixed together, with plain JSON lines in between."""
    messages = [_message(text, i) for i, text in enumerate(texts)]
    streams = [encode_message(m, limit) for m in messages] + [[b'{"jsonrpc":"2.0","method":"ping"}\n']]
    # Interleave the streams, each stream's own lines in a random order too.
    queues = [data.draw(st.permutations(lines)) for lines in streams]
    order = data.draw(st.permutations([i for i, q in enumerate(queues) for _ in q]))
    reassembler = Reassembler()
    out: list[bytes] = []
    for i in order:
        message = reassembler.feed(queues[i].pop())
        if message is not None:
            assert isinstance(message, bytes), message
            out.append(message)
    assert sorted(out) == sorted([m.encode() for m in messages] + [b'{"jsonrpc":"2.0","method":"ping"}'])
    assert reassembler.buffered_bytes == 0


def test_limit_is_inclusive_and_counts_bytes() -> None:
    exact = _message("x" * 10)
    size = len(exact.encode())
    assert encode_message(exact, size) == [exact.encode() + b"\n"]
    assert len(encode_message(exact, size - 1)) == 2
    # 'é' is 2 bytes: the limit is on bytes, not characters.
    wide = _message("é" * 10)
    assert len(wide.encode()) == len(wide) + 10
    assert len(encode_message(wide, len(wide))) == 2


def test_default_limit_keeps_frames_under_a_64k_pipe_buffer() -> None:
    lines = encode_message(_message("🚀" * 100_000))
    assert len(lines) > 1
    assert all(len(line) < 64 * 1024 for line in lines)
    assert max(len(parse_frame(line[:-1]).data) for line in lines) <= DEFAULT_CHUNK_LIMIT


def test_split_never_cuts_inside_a_character() -> None:
    data = "a🚀b".encode()  # the rocket is 4 bytes at offset 1
    assert split_utf8(data, 4) == [b"a", "🚀".encode(), b"b"]
    # Bytes that are not UTF-8 still split (at the limit) instead of looping forever.
    assert split_utf8(b"\x80" * 9, 4) == [b"\x80" * 4, b"\x80" * 4, b"\x80"]


@pytest.mark.parametrize("limit", [0, 3, -1])
def test_chunk_limit_below_one_character_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="at least 4 bytes"):
        encode_message("{}", limit)


def test_message_with_raw_newline_is_refused() -> None:
    with pytest.raises(ValueError, match="raw newline"):
        encode_message('{"a":\n1}', 100)


def test_a_trailing_line_newline_ends_the_line_and_is_not_data() -> None:
    assert encode_message('{"a":1}\n', 100) == [b'{"a":1}\n']
    lines = encode_message('{"a":"abcdefgh"}\n', 8)
    assert b"".join(parse_frame(line[:-1]).data for line in lines) == b'{"a":"abcdefgh"}'


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"chunk_limit": 3}, "at least 4 bytes"),
        ({"timeout_s": 0}, "timeout"),
        ({"max_buffered_bytes": 0}, "max_buffered_bytes must be at least 1"),
        ({"max_partial_messages": 0}, "max_partial_messages must be at least 1"),
        ({"max_frames_per_message": 0}, "max_frames_per_message must be at least 1"),
    ],
)
def test_framing_options_are_validated(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FramingOptions(**kwargs)  # type: ignore[arg-type]


def test_blank_lines_are_ignored_and_json_passes_with_whitespace() -> None:
    reassembler = Reassembler()
    assert reassembler.feed(b"\n") is None
    assert reassembler.feed(b"  \r\n") is None
    assert reassembler.feed(b'  [{"jsonrpc":"2.0"}]\n') == b'  [{"jsonrpc":"2.0"}]'


def test_a_line_that_is_neither_json_nor_a_frame_passes_on_for_the_json_rpc_layer_to_answer() -> None:
    reassembler = Reassembler(FramingOptions(max_message_bytes=20))
    assert reassembler.feed(b"this is not json\n") == b"this is not json"
    assert reassembler.feed(b"\xff\xfe{garbage") == b"\xff\xfe{garbage"


def _rejected(caplog: pytest.LogCaptureFixture, needle: str) -> None:
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(needle in message for message in errors), errors
    caplog.clear()


MID = "0b6f0f4e-4a47-4d55-9b3f-2c9b4d3f6a10"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"0 hello world", "malformed frame header"),
        (b"abc-not-a-uuid:0:2:abc", "malformed frame header"),
        (f"{MID}:x:2:abc".encode(), "malformed frame header"),
        (f"{MID}:0:2".encode(), "malformed frame header"),
        (f"{MID}:0:0:abc".encode(), "totalChunks must be at least 1"),
        (f"{MID}:2:2:abc".encode(), "out of range"),
        (f"{MID}:0:-1:abc".encode(), "malformed frame header"),
    ],
)
def test_bad_header_is_rejected_and_stream_goes_on(line: bytes, needle: str, caplog: pytest.LogCaptureFixture) -> None:
    reassembler = Reassembler()
    good = _message("after the bad line é🚀")
    frames = _frames(good, 10)
    assert reassembler.feed(frames[0]) is None
    assert reassembler.feed(line) is None
    _rejected(caplog, needle)
    assert [reassembler.feed(f) for f in frames[1:]][-1] == good.encode()
    assert reassembler.feed(b'{"jsonrpc":"2.0","method":"ping"}') == b'{"jsonrpc":"2.0","method":"ping"}'


def test_total_changing_within_a_message_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    reassembler = Reassembler()
    message = _message("abcdefghijklmnop")
    frames = _frames(message, 8)
    message_id = parse_frame(frames[0][:-1]).message_id
    reassembler.feed(frames[0])
    assert reassembler.feed(f"{message_id}:1:{len(frames) + 5}:zzz\n".encode()) is None
    _rejected(caplog, f"totalChunks changed from {len(frames)} to {len(frames) + 5}")
    assert [reassembler.feed(f) for f in frames[1:]][-1] == message.encode()


def test_duplicate_chunk_with_different_data_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    reassembler = Reassembler()
    message = _message("abcdefghijklmnop")
    frames = _frames(message, 8)
    frame = parse_frame(frames[0][:-1])
    reassembler.feed(frames[0])
    forged = f"{frame.message_id}:0:{frame.total}:".encode() + b"X" * len(frame.data) + b"\n"
    assert reassembler.feed(forged) is None
    _rejected(caplog, "duplicate chunk 0")
    assert [reassembler.feed(f) for f in frames[1:]][-1] == message.encode()


def test_identical_duplicate_chunk_is_harmless(caplog: pytest.LogCaptureFixture) -> None:
    reassembler = Reassembler()
    message = _message("abcdefghijklmnop")
    frames = _frames(message, 8)
    results = [reassembler.feed(f) for f in [frames[0], frames[0], *frames[1:]]]
    assert results[-1] == message.encode()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_idle_partial_message_is_dropped_after_timeout(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    reassembler = Reassembler(FramingOptions(timeout_s=30), clock=clock)
    stale = _frames(_message("never finished"), 8)
    reassembler.feed(stale[0])
    assert reassembler.pending_messages == 1 and reassembler.buffered_bytes == 8 + FRAME_OVERHEAD
    clock.now += 30.5
    assert reassembler.feed(b'{"jsonrpc":"2.0","method":"ping"}') == b'{"jsonrpc":"2.0","method":"ping"}'
    _rejected(caplog, "no chunk arrived for 30 s")
    assert reassembler.pending_messages == 0 and reassembler.buffered_bytes == 0
    # Its late chunks are discarded, not the start of a buffer that could never complete.
    for frame in stale[1:]:
        assert reassembler.feed(frame) is None
    assert reassembler.pending_messages == 0 and reassembler.buffered_bytes == 0


def test_slow_but_steady_message_is_not_dropped() -> None:
    """The timeout is on silence, not age: a message arriving chunk by chunk survives."""
    clock = _Clock()
    reassembler = Reassembler(FramingOptions(timeout_s=30), clock=clock)
    message = _message("abcdefghijklmnopqrstuvwxyz")
    results = []
    for frame in _frames(message, 8):
        clock.now += 20
        results.append(reassembler.feed(frame))
    assert results[-1] == message.encode()


def test_buffer_cap_drops_the_overflowing_message_and_says_so_with_its_id(caplog: pytest.LogCaptureFixture) -> None:
    cap = 4 * (16 + FRAME_OVERHEAD)  # four frames of 16 bytes
    reassembler = Reassembler(FramingOptions(max_buffered_bytes=cap))
    small = _message("fits")  # ~50 bytes, framed at 16: four frames
    big = _message("x" * 100, request_id=41)
    small_frames, big_frames = _frames(small, 16), _frames(big, 16)
    reassembler.feed(small_frames[0])
    outcomes = [reassembler.feed(f) for f in big_frames]
    # The fourth frame held would pass the cap; the later ones are late frames, discarded quietly.
    assert outcomes[:3] == [None] * 3 and outcomes[4:] == [None] * (len(big_frames) - 4)
    refused = outcomes[3]
    assert isinstance(refused, Refused) and f"over {cap} bytes" in refused.reason
    assert leading_fields(refused.head)["id"] == 41
    _rejected(caplog, f"over {cap} bytes")
    assert reassembler.buffered_bytes == 16 + FRAME_OVERHEAD  # only the small message's first chunk is held
    assert [reassembler.feed(f) for f in small_frames[1:]][-1] == small.encode()
    assert reassembler.buffered_bytes == 0


def test_expire_runs_without_a_line_and_says_when_to_look_again() -> None:
    clock = _Clock()
    reassembler = Reassembler(FramingOptions(timeout_s=30), clock=clock)
    assert reassembler.expire() == 30  # nothing pending: check again after a full timeout
    reassembler.feed(_frames(_message("never finished"), 8)[0])
    clock.now += 20
    assert reassembler.expire() == pytest.approx(10) and reassembler.pending_messages == 1
    clock.now += 10
    reassembler.expire()
    assert reassembler.pending_messages == 0 and reassembler.buffered_bytes == 0


def _start(reassembler: Reassembler, total: int = 2, data: bytes = b"") -> str:
    """Feed the first frame of a new message of `total` frames; return its id."""
    message_id = str(uuid.uuid4())
    assert reassembler.feed(f"{message_id}:0:{total}:".encode() + data) is None
    return message_id


def test_expiry_follows_last_activity_not_arrival() -> None:
    clock = _Clock()
    reassembler = Reassembler(FramingOptions(timeout_s=30), clock=clock)
    first = _start(reassembler, total=3)
    clock.now += 10
    _start(reassembler)
    clock.now += 10
    _start(reassembler)
    clock.now += 5  # the first message gets a chunk: it is now the most recently active
    assert reassembler.feed(f"{first}:1:3:x".encode()) is None
    assert reassembler.expire() == pytest.approx(15)  # the second expires first, at +10 +30
    clock.now += 15
    assert reassembler.expire() == pytest.approx(10) and reassembler.pending_messages == 2
    clock.now += 10
    assert reassembler.expire() == pytest.approx(5) and reassembler.pending_messages == 1
    assert reassembler.feed(f"{first}:2:3:y".encode()) == b"xy"  # the first survived: it was active
    assert reassembler.pending_messages == 0 and reassembler.expire() == 30


class _WatchedPartial(framing._Partial):
    """A partial message that counts how often its idle time is looked at."""

    reads = 0

    @property
    def last_seen(self) -> float:
        _WatchedPartial.reads += 1
        return self._last_seen

    @last_seen.setter
    def last_seen(self, value: float) -> None:
        self._last_seen = value


def test_expiry_looks_only_at_what_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    """With thousands of messages pending, each line costs O(1) expiry work, not a scan of all."""
    monkeypatch.setattr(framing, "_Partial", _WatchedPartial)
    clock = _Clock()
    reassembler = Reassembler(FramingOptions(timeout_s=30, max_partial_messages=10_000), clock=clock)
    for _ in range(5_000):
        _start(reassembler)
    _WatchedPartial.reads = 0
    for _ in range(5_000):
        assert reassembler.feed(b'{"jsonrpc":"2.0","method":"ping"}') is not None
    per_lines = _WatchedPartial.reads
    assert per_lines <= 2 * 5_000  # the oldest one's idle time, a constant number of times per line
    clock.now += 30
    reassembler.expire()  # now every one expires: each is looked at, once or twice
    assert reassembler.pending_messages == 0 and 5_000 <= _WatchedPartial.reads - per_lines <= 2 * 5_000


def test_incomplete_messages_at_once_are_capped_and_the_next_one_is_refused_with_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reassembler = Reassembler(FramingOptions(max_partial_messages=2))
    held = [_start(reassembler), _start(reassembler)]
    refused = reassembler.feed(f"{MID}:0:2:".encode() + b'{"jsonrpc":"2.0","id":42,')
    assert isinstance(refused, Refused) and "2 framed messages are already incomplete" in refused.reason
    assert leading_fields(refused.head)["id"] == 42
    _rejected(caplog, "2 framed messages are already incomplete")
    assert reassembler.feed(f'{MID}:1:2:"method":"ping"}}'.encode()) is None  # its late frame: ignored
    assert reassembler.pending_messages == 2
    # A one-frame message never waits, so it passes at the cap; a completed one frees its place.
    assert reassembler.feed(f"{uuid.uuid4()}:0:1:{{}}".encode()) == b"{}"
    assert reassembler.feed(f"{held[0]}:1:2:{{}}".encode()) == b"{}"
    _start(reassembler)
    assert reassembler.pending_messages == 2


def test_a_message_claiming_more_frames_than_allowed_is_refused_at_its_first_frame() -> None:
    reassembler = Reassembler(FramingOptions(max_frames_per_message=4))
    assert reassembler.feed(f"{uuid.uuid4()}:3:4:x".encode()) is None  # at the cap: accepted
    refused = reassembler.feed(f"{MID}:0:5:".encode() + b'{"jsonrpc":"2.0","id":"five",')
    assert isinstance(refused, Refused) and "claims 5 frames, over the limit of 4" in refused.reason
    assert leading_fields(refused.head)["id"] == "five"
    assert reassembler.feed(f"{MID}:1:5:x".encode()) is None and reassembler.pending_messages == 1
    # The default cap: a claim of a billion frames is refused at once, nothing allocated for it.
    reassembler = Reassembler()
    refused = reassembler.feed(f"{MID}:5:999999999:".encode())
    assert isinstance(refused, Refused) and refused.head == b""  # its first frame, with the id, not seen
    assert reassembler.pending_messages == 0 and reassembler.buffered_bytes == 0


def test_empty_frames_cost_their_overhead_against_the_buffer_cap() -> None:
    head = b'{"jsonrpc":"2.0","id":43,'
    reassembler = Reassembler(FramingOptions(max_buffered_bytes=len(head) + 10 * FRAME_OVERHEAD))
    message_id = _start(reassembler, total=100, data=head)
    outcomes = [reassembler.feed(f"{message_id}:{index}:100:".encode()) for index in range(1, 20)]
    refused = outcomes[9]  # with the first and nine empty frames held, the next would pass the cap
    assert outcomes[:9] == [None] * 9 and outcomes[10:] == [None] * 9
    assert isinstance(refused, Refused) and leading_fields(refused.head)["id"] == 43
    assert reassembler.pending_messages == 0 and reassembler.buffered_bytes == 0


def test_a_framed_message_over_the_message_cap_is_refused_with_its_first_chunk() -> None:
    reassembler = Reassembler(FramingOptions(max_message_bytes=100))
    message = _message("x" * 200, request_id=77)
    results = [reassembler.feed(f) for f in _frames(message, 40)]
    refused = [r for r in results if isinstance(r, TooLarge)]
    assert len(refused) == 1 and refused[0].limit == 100 and 100 < refused[0].size <= 140
    assert leading_fields(refused[0].head)["id"] == 77
    assert reassembler.buffered_bytes == 0 and reassembler.pending_messages == 0  # the rest is ignored
    plain = _message("y" * 200, request_id=78).encode()
    assert reassembler.feed(plain) == TooLarge(len(plain), 100, plain)


def test_line_splitter_never_holds_more_than_its_bound() -> None:
    splitter = LineSplitter(1000)
    lines: list[bytes | TooLarge] = []
    big = b'{"jsonrpc":"2.0","id":"q1","method":"x","params":"' + b"y" * 64 * 1024
    for _ in range(1600):  # a 100 MB line in 64 KiB reads
        lines += splitter.feed(big if not lines and splitter.held_bytes == 0 else b"y" * 64 * 1024)
        assert splitter.held_bytes <= 4096  # only the head is kept once the bound is passed
    lines += splitter.feed(b'"}\n{"short":1}\npartial')
    assert [type(line) for line in lines] == [TooLarge, bytes]
    too_large = lines[0]
    assert isinstance(too_large, TooLarge)
    assert too_large.size > 100 * 1000 * 1000 and too_large.limit == 1000
    assert leading_fields(too_large.head) == {"jsonrpc": "2.0", "id": "q1", "method": "x", "params": ...}
    assert lines[1] == b'{"short":1}'
    assert splitter.close() == b"partial" and splitter.close() is None


@pytest.mark.parametrize(
    ("head", "fields"),
    [
        (
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"id":6',
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ...},
        ),
        (b'{"method":"m","params":{"id":6,"s":"\\"id\\":7"},"id":"a"}', {"method": "m", "params": ..., "id": "a"}),
        (b'{"params":{"a":"unterminated \\"id\\": 9', {"params": ...}),
        (b'[{"id":1}]', {}),
        (b"not json", {}),
        (b'{"jsonrpc":"2.0","id":12', {"jsonrpc": "2.0", "id": ...}),  # 12 or 123...: unknown
    ],
)
def test_leading_fields_reads_only_top_level_keys(head: bytes, fields: dict[str, object]) -> None:
    assert leading_fields(head) == fields
