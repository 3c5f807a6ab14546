"""Signed, opaque cursors: `CursorCodec.encode(CursorState) -> str` and back.

The string is itsdangerous' URL-safe timed format (zlib-compressed JSON payload, timestamp,
HMAC-SHA256), so clients never parse it and any edit is caught. It carries everything needed to
continue without server memory: the session id for the fast path, and the search-defining
request plus a digest of the result list so a lost session can be rebuilt and proven identical.

The codec is generic on purpose: `kind` says what the cursor walks ("search" here; proxy
datasets reuse the codec with their own kind and leave search fields empty), and decoding
checks the kind so one feature's cursor is never accepted by another.

Why the extra checks around itsdangerous:
- Its base64 decoding ignores stray characters and unused trailing bits, so two different
  strings can verify as the same cursor. We accept only the exact canonical spelling.
- HMAC alone cannot tell "tampered" from "signed with another key". The payload carries a
  fingerprint of the key, readable without verifying, which separates the two cases.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from itsdangerous import BadData, BadSignature, TimestampSigner, URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode, base64_encode

from sessions.errors import (
    CursorExpiredError,
    CursorMalformedError,
    CursorParamsMismatchError,
    CursorSignatureError,
)

CURSOR_VERSION = 1
SEARCH_KIND = "search"
DEFAULT_MAX_AGE_S = 3600.0
#: How far in the future a cursor's stamp may be: replicas' clocks differ a little, and a cursor
#: minted on one may page on another a moment later. Beyond it the stamp is forged or broken.
CLOCK_SKEW_S = 5.0
_SALT = "codepager.cursor"
_SHAPE = re.compile(r"\.?[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


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


class _ClockedSigner(TimestampSigner):
    """TimestampSigner whose notion of "now" is injectable, so expiry is testable."""

    def __init__(self, *args: Any, clock: Callable[[], float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clock = clock

    def get_timestamp(self) -> int:
        return int(self._clock())


class CursorCodec:
    """Signs and verifies cursors with one secret key.

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
        self.key_id = hashlib.sha256(b"codepager-cursor-key-id:" + key).hexdigest()[:8]
        self._clock = clock
        self._serializer = URLSafeTimedSerializer(
            key,
            salt=_SALT,
            signer=_ClockedSigner,
            signer_kwargs={"clock": clock, "digest_method": hashlib.sha256},
        )

    def encode(self, state: CursorState) -> str:
        payload: dict[str, Any] = {"v": CURSOR_VERSION, "k": self.key_id}
        for name, wire in _WIRE_KEYS.items():
            value = getattr(state, name)
            if value != _FIELDS[name].default:
                payload[wire] = value
        return self._serializer.dumps(payload)

    def decode(self, token: str, *, kind: str = SEARCH_KIND, params_hash: str | None = None) -> CursorState:
        """Verify `token` and return its state, or raise the `CursorError` naming the reason.

        `kind` must match the cursor's; `params_hash`, when the caller re-sent the search
        parameters, must match the ones the cursor was issued for.
        """
        if not isinstance(token, str) or not _SHAPE.fullmatch(token) or not _is_canonical(token):
            raise CursorMalformedError("not a cursor string")
        try:
            payload, signed_at = self._serializer.loads(token, return_timestamp=True)
        except BadSignature as e:
            raise self._signature_failure(e) from None
        except BadData:
            raise CursorMalformedError("unreadable payload") from None
        except (ValueError, OverflowError, OSError):
            # A stamp past what a datetime holds (after the year 9999): from the future.
            raise CursorExpiredError(-1.0, self.max_age_s) from None
        age = self._clock() - signed_at.timestamp()
        if not -CLOCK_SKEW_S <= age <= self.max_age_s:
            raise CursorExpiredError(age, self.max_age_s)
        state = _state_from_payload(payload)
        if state.kind != kind:
            raise CursorMalformedError(f"it pages a {state.kind}, not a {kind}")
        if params_hash is not None and params_hash != state.params_hash:
            raise CursorParamsMismatchError()
        return state

    def _signature_failure(self, error: BadSignature) -> CursorMalformedError | CursorSignatureError:
        """Tampered, or signed by another key? Decide by the (unverified) key fingerprint."""
        if error.payload is not None:
            try:
                payload = self._serializer.load_payload(error.payload)
            except BadData:
                payload = None
            if isinstance(payload, dict) and payload.get("v") == CURSOR_VERSION:
                key_id = payload.get("k")
                if isinstance(key_id, str) and key_id != self.key_id:
                    return CursorSignatureError()
        return CursorMalformedError("signature check failed")


def _is_canonical(token: str) -> bool:
    """True if every base64 segment is spelled exactly as itsdangerous would spell it."""
    try:
        return all(base64_encode(base64_decode(seg)).decode() == seg for seg in token.lstrip(".").split("."))
    except BadData:
        return False


def _state_from_payload(payload: Any) -> CursorState:
    if not isinstance(payload, dict):
        raise CursorMalformedError("unexpected payload")
    if payload.get("v") != CURSOR_VERSION:
        raise CursorMalformedError("it was issued by an incompatible codepager version")
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
