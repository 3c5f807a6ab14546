"""CursorCodec: round trips, sealed (hidden and authenticated) payloads, bounded reading, and
one typed refusal per reason (tampering, other key, age, kind, size)."""

from __future__ import annotations

import base64
import json
import os
import time
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions import (
    CursorCodec,
    CursorError,
    CursorExpiredError,
    CursorMalformedError,
    CursorParamsMismatchError,
    CursorSignatureError,
    CursorState,
    CursorTooLargeError,
)
from sessions.cursor import CURSOR_VERSION, MAX_PAYLOAD_BYTES
from sessions.sealing import Sealer
from tests.session_fakes import SECRET, FakeClock, request_for

REQUEST = request_for("def \\w+_handler", include=["*.py"])
STATE = CursorState(
    session_id="0f" * 16,
    offset=150,
    page_size=50,
    params_hash=REQUEST.params_hash(),
    index_generation=3,
    total_count=1234,
    digest="ab" * 12,
    request_json=REQUEST.model_dump_json(exclude_defaults=True),
    view='.matches[] | select(.path | test("api"))',
)
CODEC = CursorCodec(SECRET)
TOKEN = CODEC.encode(STATE)

states = st.builds(
    CursorState,
    session_id=st.text(min_size=1, max_size=40),
    offset=st.integers(0, 10**9),
    page_size=st.integers(1, 10**4),
    kind=st.sampled_from(["search", "dataset"]),
    params_hash=st.text(max_size=30),
    index_generation=st.integers(0, 2**40),
    total_count=st.integers(0, 10**9),
    digest=st.text(max_size=30),
    request_json=st.text(max_size=300),
    view=st.none() | st.text(max_size=100),
)


@pytest.mark.slow
@given(states)
def test_any_state_round_trips(state: CursorState) -> None:
    token = CODEC.encode(state)
    assert CODEC.decode(token, kind=state.kind) == state


def test_cursor_is_opaque_url_safe_text() -> None:
    assert set(TOKEN) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    assert TOKEN.startswith(CODEC.key_id)  # the key id, in clear
    assert CODEC.decode(TOKEN) == STATE


def test_the_payload_is_encrypted_not_just_compressed() -> None:
    raw = base64.urlsafe_b64decode(TOKEN[8:] + "=" * (-len(TOKEN[8:]) % 4))
    for start in range(len(raw)):
        for wbits in (15, -15):
            try:
                text = zlib.decompressobj(wbits).decompress(raw[start:], 1 << 16)
            except zlib.error:
                continue
            assert STATE.session_id.encode() not in text and b"handler" not in text
    assert STATE.session_id.encode() not in raw and b"handler" not in raw


def test_equal_states_seal_to_different_cursors() -> None:
    """A fresh nonce per cursor: two cursors of one page say nothing about each other."""
    assert CODEC.encode(STATE) != CODEC.encode(STATE)


_OTHER_CHARS = st.sampled_from([*"AaZz09-_.=+/~ é\n", "%2E"])


@settings(max_examples=300)
@given(st.data())
def test_any_mutation_of_a_cursor_is_rejected(data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
    i = data.draw(st.integers(0, len(TOKEN) - 1))
    if op == "flip":
        c = data.draw(_OTHER_CHARS.filter(lambda c: c != TOKEN[i]))
        mutated = TOKEN[:i] + c + TOKEN[i + 1 :]
    elif op == "insert":
        mutated = TOKEN[:i] + data.draw(_OTHER_CHARS) + TOKEN[i:]
    else:
        mutated = TOKEN[:i] + TOKEN[i + 1 :]
    with pytest.raises((CursorMalformedError, CursorSignatureError)):
        CODEC.decode(mutated)


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_equivalent_base64_spellings_are_rejected() -> None:
    """The last base64 character has unused low bits; a sloppy decoder accepts both spellings.

    Only a body whose length is not a multiple of 4 has them, and the length follows the
    compressed issue time, so the clock is stepped (from a fixed start) to a second that gives
    one: on the wall clock, ~7% of seconds gave none and the test failed."""
    clock = FakeClock()
    codec = CursorCodec(SECRET, clock=clock)
    for _ in range(100):
        token = codec.encode(STATE)
        if len(token[8:]) % 4:
            break
        clock.advance(1)
    body = token[8:]
    assert len(body) % 4, "test premise: a token with spare bits within 100 seconds"
    twins = [
        c
        for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        if c != body[-1] and _b64decode(body[:-1] + c) == _b64decode(body)
    ]
    assert twins, "test premise: the last character has spare bits"
    for c in twins:
        with pytest.raises(CursorMalformedError, match="canonical"):
            codec.decode(token[:-1] + c)
    for padded in (token + "=", token + "=" * (-len(body) % 4)):
        with pytest.raises(CursorMalformedError):
            codec.decode(padded)


OLD_SIGNED = ".eJwdi9FuwyA.aR9zXA.hKgkqAKrG09gCmgVvEDN3xVZ5PXDxyPKQWh7bhhOJc"  # the format before sealing


@pytest.mark.parametrize(
    "junk", ["", "abc", "a.b.c", "..", TOKEN + ".x", " " + TOKEN, TOKEN + "\n", OLD_SIGNED, TOKEN[:40]]
)
def test_junk_is_malformed_with_an_actionable_message(junk: str) -> None:
    with pytest.raises(CursorMalformedError, match="exactly as it was returned"):
        CODEC.decode(junk)


def test_non_string_is_malformed() -> None:
    with pytest.raises(CursorMalformedError):
        CODEC.decode(12345)  # type: ignore[arg-type]


def test_another_key_is_a_signature_error_not_tampering() -> None:
    with pytest.raises(CursorSignatureError, match="different server key"):
        CursorCodec("another-secret-key-abcdefghijklmnop").decode(TOKEN)


def test_an_edited_key_id_is_not_mistaken_for_ours() -> None:
    """The key id is bound to the ciphertext: our own id on another key's cursor is tampering."""
    foreign = CursorCodec("another-secret-key-abcdefghijklmnop").encode(STATE)
    with pytest.raises(CursorMalformedError, match="authentication failed"):
        CODEC.decode(CODEC.key_id + foreign[8:])


def test_same_key_in_a_new_codec_accepts_the_cursor() -> None:
    assert CursorCodec(SECRET.encode()).decode(TOKEN) == STATE


def test_expiry_follows_the_injected_clock() -> None:
    clock = FakeClock()
    codec = CursorCodec(SECRET, max_age_s=3600, clock=clock)
    token = codec.encode(STATE)
    clock.advance(3599)
    assert codec.decode(token) == STATE
    clock.advance(2)
    with pytest.raises(CursorExpiredError, match=r"3601 s old.*valid for 3600 s.*without a cursor") as err:
        codec.decode(token)
    assert err.value.age_s == pytest.approx(3601)


def test_a_cursor_from_the_future_is_refused() -> None:
    clock = FakeClock()
    token = CursorCodec(SECRET, clock=clock).encode(STATE)
    clock.advance(-120)
    with pytest.raises(CursorExpiredError, match="future"):
        CursorCodec(SECRET, clock=clock).decode(token)


def test_a_params_mismatch_names_the_parameter_not_the_cursors_value() -> None:
    message = str(CursorParamsMismatchError("include_patterns"))
    assert "`include_patterns`" in message and "only the cursor" in message


# -- bounded reading ---------------------------------------------------------------------------

SEALER = Sealer(SECRET.encode(), max_plaintext=1 + MAX_PAYLOAD_BYTES)


def sealed(plaintext: bytes) -> str:
    """A cursor sealed with the codec's own key around arbitrary bytes (what only a holder of
    the key could make)."""
    return SEALER.seal(plaintext, int(time.time()))


def deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def test_an_authentic_deflate_bomb_is_inflated_no_further_than_the_payload_bound() -> None:
    payload = b'{"v":2,"p":"' + b"A" * (64 * MAX_PAYLOAD_BYTES) + b'"}'
    bomb = sealed(b"\x01" + deflated(payload))
    del payload
    assert len(bomb) < 120_000
    tracemalloc.start()
    try:
        with pytest.raises(CursorMalformedError, match="too large"):
            CODEC.decode(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_PAYLOAD_BYTES, peak


def _payload(**extra: object) -> bytes:
    base = {"v": CURSOR_VERSION, "i": int(time.time()), "s": "x", "o": 0, "n": 1}
    return json.dumps({**base, **extra}).encode()


@pytest.mark.parametrize(
    ("plaintext", "reason"),
    [
        (b"", "unknown payload format"),
        (b"\x07" + _payload(), "unknown payload format"),
        (b"\x01" + deflated(_payload())[:-3], "incomplete"),
        (b"\x01" + deflated(_payload()) + b"trailing", "incomplete"),
        (b"\x01not deflate at all", "unreadable"),
        (b"\x00[1, 2]", "unexpected payload"),
        (b"\x00{not json", "unreadable"),
        (b"\x00" + _payload(v=1), "incompatible codepager version"),
        (b"\x00" + _payload(i="yesterday"), "no issue time"),
        (b"\x00" + _payload(o=-1), "out of range"),
    ],
)
def test_authentic_but_broken_payloads_are_malformed(plaintext: bytes, reason: str) -> None:
    with pytest.raises(CursorMalformedError, match=reason):
        CODEC.decode(sealed(plaintext))


def test_both_payload_forms_decode() -> None:
    assert CODEC.decode(sealed(b"\x00" + _payload())).session_id == "x"
    assert CODEC.decode(sealed(b"\x01" + deflated(_payload()))).session_id == "x"


def test_a_cursor_longer_than_any_the_codec_makes_is_refused_unread() -> None:
    too_long = TOKEN + "A" * SEALER.max_chars
    with pytest.raises(CursorMalformedError, match=f"too long: {len(too_long):,} characters"):
        CODEC.decode(too_long)


def test_a_search_too_large_for_a_cursor_is_refused_when_minted() -> None:
    huge = CursorState(session_id="s", offset=0, page_size=1, request_json="x" * MAX_PAYLOAD_BYTES)
    with pytest.raises(CursorTooLargeError, match="too large to page") as err:
        CODEC.encode(huge)
    assert isinstance(err.value, CursorError)
    noise = base64.b64encode(os.urandom(MAX_PAYLOAD_BYTES)).decode()[: MAX_PAYLOAD_BYTES - 200]  # incompressible
    largest = CursorState(session_id="s", offset=0, page_size=1, request_json=noise)
    token = CODEC.encode(largest)
    assert len(token) <= SEALER.max_chars and CODEC.decode(token) == largest


def test_kinds_do_not_mix() -> None:
    dataset_token = CODEC.encode(CursorState(session_id="ds_01", offset=100, page_size=100, kind="dataset"))
    assert CODEC.decode(dataset_token, kind="dataset").session_id == "ds_01"
    with pytest.raises(CursorMalformedError, match="pages a dataset, not a search"):
        CODEC.decode(dataset_token)
    with pytest.raises(CursorMalformedError, match="pages a search, not a dataset"):
        CODEC.decode(TOKEN, kind="dataset")


@pytest.mark.parametrize("kw", [{"secret_key": ""}, {"secret_key": SECRET, "max_age_s": 0}])
def test_codec_refuses_bad_configuration(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CursorCodec(**kw)  # type: ignore[arg-type]


def test_every_refusal_is_a_cursor_error_and_a_value_error() -> None:
    for cls in (CursorMalformedError, CursorSignatureError, CursorParamsMismatchError, CursorTooLargeError):
        assert issubclass(cls, CursorError) and issubclass(cls, ValueError)


def test_a_few_seconds_of_clock_skew_between_replicas_is_tolerated() -> None:
    clock = FakeClock()
    token = CursorCodec(SECRET, clock=clock).encode(STATE)
    clock.advance(-3)  # the replica reading it runs 3 s behind the one that minted it
    assert CursorCodec(SECRET, clock=clock).decode(token) == STATE
    clock.advance(-10)
    with pytest.raises(CursorExpiredError, match="future"):
        CursorCodec(SECRET, clock=clock).decode(token)
