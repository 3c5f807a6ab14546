"""How codepager turns records into JSON text, and the one estimate of how big that text is.

Compact, UTF-8, non-ASCII unescaped: every byte is a token the agent pays for, and an escaped
`\\u00e9` (6 characters) costs more than the character itself. msgspec (already used to decode
ripgrep's events) encodes several times faster than the standard library, which matters
because every page is serialized at least once to be measured, and offloaded pages line by
line. NaN/Infinity, which JSON lacks, become null.

msgspec refuses one thing the standard library accepts: lone surrogates (file content that was
not valid UTF-8, decoded with `surrogateescape`). Such values fall back to the standard
library with each lone surrogate written as the JSON escape `\\udcxx`, so the text is always
valid Unicode and valid JSON (that path refuses NaN rather than write invalid JSON).

Size: Claude Code refuses MCP tool output above ~25,000 tokens, so every "does this fit?"
question (inline vs file_ref, how far to cut a page, the proxy's threshold for a backend's
result and for its own answers) is answered by one rule, `estimate_tokens`, or two layers would
disagree about the same response: 4 ASCII characters a token and 1 token per non-ASCII
character (CJK text and emoji tokenize far worse than English, about a token a character, so
text of any script is estimated a little pessimistically). It reads text or its UTF-8 bytes
alike, so a backend's raw JSON is measured without decoding it when it is ASCII.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

#: ASCII characters per token, the rule of `estimate_tokens` (also: a client limit in characters).
CHARS_PER_TOKEN = 4
#: The most bytes one answer carries: a page (with `offload.max_tokens`, over either it goes to
#: a file), and one read of a codepager://results resource. Not a setting (it was
#: `offload.max_bytes`): a token is at most 4 bytes by `estimate_tokens`, so a page within
#: max_tokens is within this unless max_tokens is over 262,144; a client that counts bytes has
#: its own limit in `offload.clients`. Read where it is used, when the store or layer is made.
MAX_ANSWER_BYTES = 1 << 20
_ENCODER = msgspec.json.Encoder()
_STDLIB = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _stdlib_dumps(value: Any) -> str:
    return _STDLIB.encode(value).encode("utf-8", "backslashreplace").decode("utf-8")


def dumps_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON of `value` (TypeError if it holds something that is not JSON)."""
    try:
        return _ENCODER.encode(value)
    except UnicodeEncodeError:
        return _stdlib_dumps(value).encode("utf-8")


def dumps_lines(values: Iterable[Any]) -> bytes:
    """JSON Lines: `dumps_bytes` of each value, each followed by a newline (one C call)."""
    values = values if isinstance(values, Sequence) else list(values)
    try:
        return _ENCODER.encode_lines(values)
    except UnicodeEncodeError:
        return b"".join([dumps_bytes(v) + b"\n" for v in values])


def dumps(value: Any) -> str:
    """`dumps_bytes(value)` as text: what the text block and the size estimate see."""
    return dumps_bytes(value).decode("utf-8")


def byte_size(text: str) -> int:
    """UTF-8 size of `text`, without encoding ASCII text. A lone surrogate (a proxied backend's
    JSON may carry `\\udc80`) counts the 3 bytes it is written in, instead of failing."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def estimate_tokens(text: str | bytes) -> int:
    """Estimated tokens of `text` (or of the text its UTF-8 bytes encode): ceil(ascii_chars / 4)
    + non_ascii_chars. `str.isascii()` is O(1) on CPython (a flag on the object) and
    `bytes.isascii()` one C pass; otherwise one C-level encode counts the ASCII."""
    if text.isascii():
        return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN + (len(text) - ascii_chars)
