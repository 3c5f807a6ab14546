"""Sealed, opaque cursors: `CursorCodec.encode(CursorState) -> str` and back.

A cursor carries everything needed to continue without server memory: the session id for the
fast path, and the search-defining request plus a digest of the result list so a lost session
can be rebuilt and proven identical. That is a root path, a query and a session id: so it is
sealed (AES-GCM, `sessions/sealing.py`), which both hides it from whoever sees the cursor
(transcripts, logs) and authenticates it before anything reads it. The payload is compact JSON,
raw-deflated when that is shorter (an agent pays tokens for every cursor it is handed), with
the time it was issued; inflating is bounded by MAX_PAYLOAD_BYTES, which `encode` enforces, so
not even a holder of the key can make a cursor that costs more to read.

The codec is generic on purpose: `kind` says what the cursor walks ("search" here; proxy
datasets reuse the codec with their own kind and leave search fields empty), and decoding
checks the kind so one feature's cursor is never accepted by another.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sessions.errors import (
    CursorExpiredError,
    CursorMalformedError,
    CursorTooLargeError,
)
from sessions.sealing import Sealer

CURSOR_VERSION = 2
SEARCH_KIND = "search"
DEFAULT_MAX_AGE_S = 3600.0
#: How far in the future a cursor's stamp may be: replicas' clocks differ a little, and a cursor
#: minted on one may page on another a moment later. Beyond it the stamp is forged or broken.
CLOCK_SKEW_S = 5.0
#: The longest payload (JSON, before deflating) a cursor may carry: far above any real search
#: (a regex argument is capped at ~128 KiB by the OS), and the bound on inflating one.
MAX_PAYLOAD_BYTES = 1 << 20
_RAW, _DEFLATED = 0, 1  # first byte of the sealed bytes: how the JSON after it is stored
_DEFLATE_WBITS = -15  # raw deflate: the seal already guards integrity, so no zlib header or checksum


@dataclass(frozen=True, slots=True)
class CursorState:
    """What a cursor says. Fields after `page_size` are optional so non-search kinds stay small.

    `total_count` and `digest` describe the list being walked (its length and
    `sessions.models.result_digest`); `request_json` is enough JSON to rebuild the search.
    """

    session_id: str
    offset: int
    page_size: int
    kind: str = SEARCH_KIND
    params_hash: str = ""
    index_generation: int = 0
    total_count: int = 0
    digest: str = ""
    request_json: str = ""
    view: str | None = None


# Short payload keys keep cursors short: an agent pays tokens for every cursor it is handed.
_WIRE_KEYS = {
    "session_id": "s",
    "offset": "o",
    "page_size": "n",
    "kind": "t",
    "params_hash": "h",
    "index_generation": "g",
    "total_count": "c",
    "digest": "d",
    "request_json": "r",
    "view": "w",
}
_FIELDS = {f.name: f for f in fields(CursorState)}
_TYPES: dict[str, tuple[type, ...]] = {
    "session_id": (str,),
    "offset": (int,),
    "page_size": (int,),
    "kind": (str,),
    "params_hash": (str,),
    "index_generation": (int,),
    "total_count": (int,),
    "digest": (str,),
    "request_json": (str,),
    "view": (str, type(None)),
}


class CursorCodec:
    """Seals and opens cursors with one secret key.

    `clock` returns wall-clock seconds (time.time): it stamps new cursors and judges their
    age against `max_age_s`.
    """

    def __init__(
        self,
        secret_key: str | bytes,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not secret_key:
            raise ValueError("a cursor codec needs a non-empty secret key")
        if max_age_s <= 0:
            raise ValueError(f"cursor max age must be positive, got {max_age_s}")
        key = secret_key.encode() if isinstance(secret_key, str) else secret_key
        self.max_age_s = max_age_s
        self._clock = clock
        self._sealer = Sealer(key, max_plaintext=1 + MAX_PAYLOAD_BYTES)
        self.key_id = self._sealer.key_id

    def encode(self, state: CursorState) -> str:
        """The cursor for `state`; CursorTooLargeError if its search is too big to carry."""
        now = int(self._clock())
        payload: dict[str, Any] = {"v": CURSOR_VERSION, "i": now}
        for name, wire in _WIRE_KEYS.items():
            value = getattr(state, name)
            if value != _FIELDS[name].default:
                payload[wire] = value
        data = json.dumps(payload, separators=(",", ":")).encode()
        if len(data) > MAX_PAYLOAD_BYTES:
            raise CursorTooLargeError(len(data), MAX_PAYLOAD_BYTES)
        packer = zlib.compressobj(wbits=_DEFLATE_WBITS)
        deflated = packer.compress(data) + packer.flush()
        packed = bytes([_DEFLATED]) + deflated if len(deflated) < len(data) else bytes([_RAW]) + data
        return self._sealer.seal(packed, now)

    def decode(self, token: str, *, kind: str = SEARCH_KIND) -> CursorState:
        """Open `token` and return its state, or raise the `CursorError` naming the reason.

        `kind` must match the cursor's."""
        if not isinstance(token, str):
            raise CursorMalformedError("not a cursor string")
        payload = _parse(self._sealer.open(token))
        if payload.get("v") != CURSOR_VERSION:
            raise CursorMalformedError("it was issued by an incompatible codepager version")
        issued = payload.get("i")
        if not isinstance(issued, int) or isinstance(issued, bool):
            raise CursorMalformedError("no issue time")
        age = self._clock() - issued
        if not -CLOCK_SKEW_S <= age <= self.max_age_s:
            raise CursorExpiredError(age, self.max_age_s)
        state = _state_from_payload(payload)
        if state.kind != kind:
            raise CursorMalformedError(f"it pages a {state.kind}, not a {kind}")
        return state


def _parse(packed: bytes) -> dict[str, Any]:
    """The JSON payload of authenticated bytes, inflating at most MAX_PAYLOAD_BYTES."""
    form, body = packed[:1], packed[1:]
    if form == bytes([_RAW]):
        data = body
    elif form == bytes([_DEFLATED]):
        inflater = zlib.decompressobj(wbits=_DEFLATE_WBITS)
        try:
            data = inflater.decompress(body, MAX_PAYLOAD_BYTES + 1)
        except zlib.error:
            raise CursorMalformedError("unreadable payload") from None
        if len(data) > MAX_PAYLOAD_BYTES or not inflater.eof or inflater.unused_data:
            raise CursorMalformedError("payload too large or incomplete")
    else:
        raise CursorMalformedError("unknown payload format")
    try:
        payload = json.loads(data)
    except ValueError:
        raise CursorMalformedError("unreadable payload") from None
    if not isinstance(payload, dict):
        raise CursorMalformedError("unexpected payload")
    return payload


def _state_from_payload(payload: dict[str, Any]) -> CursorState:
    values: dict[str, Any] = {}
    for name, wire in _WIRE_KEYS.items():
        if wire not in payload:
            continue
        value = payload[wire]
        if not isinstance(value, _TYPES[name]) or isinstance(value, bool):
            raise CursorMalformedError(f"bad field {name!r}")
        values[name] = value
    try:
        state = CursorState(**values)
    except TypeError:
        raise CursorMalformedError("missing fields") from None
    if state.offset < 0 or state.page_size < 1 or state.total_count < 0:
        raise CursorMalformedError("position out of range")
    return state
