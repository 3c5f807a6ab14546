"""Sealing cursor bytes: AES-256-GCM under a key derived from the server's secret.

A sealed token is `<key id><base64url(nonce | ciphertext | tag)>`, URL-safe and unpadded:
- The key id (8 hex chars, a fingerprint of the secret) is in clear and bound to the ciphertext
  as associated data. It lets a server say "sealed with another key" (a rotated key, a replica
  without the shared secret) without decrypting anything; editing it breaks authentication
  like any other edit.
- The nonce is 4 bytes of the sealing time (mod 2**32) and 8 random bytes. Random 96-bit nonces
  alone risk a repeat after ~2**32 tokens under one key (GCM's limit); with the time in front,
  two tokens would have to be sealed in the same second to share one.
- GCM both authenticates and hides the bytes: a token says nothing of what it carries, and
  `open` authenticates before anything reads them, so a forged token costs the server its own
  length and nothing more (nothing unverified is ever decompressed or parsed).

`open` accepts only the canonical spelling (no padding, the spare low bits of the last
character zero), so one token has exactly one spelling, and refuses a token longer than any
`seal` can produce, before decoding it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sessions.errors import CursorMalformedError, CursorSignatureError

KEY_ID_CHARS = 8
NONCE_BYTES = 12
TAG_BYTES = 16
_RANDOM_NONCE_BYTES = 8
_KEY_ID_DOMAIN = b"codepager-cursor-key-id:"
_HKDF_INFO = b"codepager cursor sealing key v2"
_AAD_PREFIX = b"codepager-cursor-v2:"
_BODY = re.compile(r"[A-Za-z0-9_-]+")
_KEY_ID = re.compile(rf"[0-9a-f]{{{KEY_ID_CHARS}}}")


def key_id_of(secret: bytes) -> str:
    """The public fingerprint of `secret` a token carries in clear (the same 8 hex chars the
    signed cursors of earlier versions carried inside their payload)."""
    return hashlib.sha256(_KEY_ID_DOMAIN + secret).hexdigest()[:KEY_ID_CHARS]


def _b64_chars(n_bytes: int) -> int:
    """Length of the unpadded base64 spelling of `n_bytes` bytes."""
    return (4 * n_bytes + 2) // 3


class Sealer:
    """Seals and opens byte strings of at most `max_plaintext` bytes with one secret."""

    def __init__(self, secret: bytes, max_plaintext: int) -> None:
        self.key_id = key_id_of(secret)
        self.max_plaintext = max_plaintext
        #: The longest token `seal` can produce: anything longer is refused unread.
        self.max_chars = KEY_ID_CHARS + _b64_chars(NONCE_BYTES + max_plaintext + TAG_BYTES)
        key = HKDF(algorithm=SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(secret)
        self._aead = AESGCM(key)
        self._aad = _AAD_PREFIX + self.key_id.encode()

    def seal(self, plaintext: bytes, now: int) -> str:
        """The token for `plaintext`; `now` (seconds) goes into the nonce."""
        if len(plaintext) > self.max_plaintext:
            raise ValueError(f"{len(plaintext)} bytes to seal, at most {self.max_plaintext}")
        nonce = (now & 0xFFFFFFFF).to_bytes(NONCE_BYTES - _RANDOM_NONCE_BYTES, "big") + os.urandom(_RANDOM_NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, plaintext, self._aad)
        return self.key_id + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def open(self, token: str) -> bytes:
        """The plaintext of a token this sealer's key sealed, else CursorSignatureError (a
        well-formed token of another key) or CursorMalformedError (anything else)."""
        if len(token) > self.max_chars:
            raise CursorMalformedError(
                f"too long: {len(token):,} characters, and no cursor is longer than {self.max_chars:,}"
            )
        key_id, body = token[:KEY_ID_CHARS], token[KEY_ID_CHARS:]
        if not _KEY_ID.fullmatch(key_id) or not _BODY.fullmatch(body):
            raise CursorMalformedError("not a cursor string")
        sealed = _canonical_b64decode(body)
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            raise CursorMalformedError("too short")
        if key_id != self.key_id:
            raise CursorSignatureError()
        try:
            return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], self._aad)
        except InvalidTag:
            raise CursorMalformedError("authentication failed") from None


def _canonical_b64decode(body: str) -> bytes:
    """Decode unpadded base64url, refusing every spelling `seal` would not have produced."""
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise CursorMalformedError("not valid base64") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
        raise CursorMalformedError("not in canonical form")
    return raw
