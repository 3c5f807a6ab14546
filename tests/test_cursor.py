"""CursorCodec: round trips, and one typed refusal per reason (tampering, other key, age,
params, kind)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from itsdangerous.encoding import base64_decode

from sessions import (
    CursorCodec,
    CursorError,
    CursorExpiredError,
    CursorMalformedError,
    CursorParamsMismatchError,
    CursorSignatureError,
    CursorState,
)
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
    view=".matches[] | select(.path | test(\"api\"))",
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


@given(states)
def test_any_state_round_trips(state: CursorState) -> None:
    token = CODEC.encode(state)
    assert CODEC.decode(token, kind=state.kind) == state


def test_cursor_is_opaque_url_safe_text() -> None:
    assert set(TOKEN) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    assert "handler" not in TOKEN and "api" not in TOKEN  # the payload is compressed
    assert CODEC.decode(TOKEN) == STATE


_OTHER_CHARS = st.sampled_from(list("AaZz09-_.=+/~ é\n") + ["%2E"])


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


def test_equivalent_base64_spellings_are_rejected() -> None:
    """The last base64 character has unused low bits; a sloppy decoder accepts both spellings."""
    signature = TOKEN.rsplit(".", 1)[1]
    twins = [
        c
        for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        if c != signature[-1] and base64_decode(signature[:-1] + c) == base64_decode(signature)
    ]
    assert twins, "test premise: the signature's last character has spare bits"
    for c in twins:
        with pytest.raises(CursorMalformedError):
            CODEC.decode(TOKEN[:-1] + c)


@pytest.mark.parametrize("junk", ["", "abc", "a.b.c", "..", TOKEN + ".x", " " + TOKEN, TOKEN + "\n"])
def test_junk_is_malformed_with_an_actionable_message(junk: str) -> None:
    with pytest.raises(CursorMalformedError, match="exactly as it was returned"):
        CODEC.decode(junk)


def test_non_string_is_malformed() -> None:
    with pytest.raises(CursorMalformedError):
        CODEC.decode(12345)  # type: ignore[arg-type]


def test_another_key_is_a_signature_error_not_tampering() -> None:
    with pytest.raises(CursorSignatureError, match="different server key"):
        CursorCodec("another-secret-key-abcdefghijklmnop").decode(TOKEN)


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


def test_re_sent_params_must_match() -> None:
    assert CODEC.decode(TOKEN, params_hash=REQUEST.params_hash()) == STATE
    other = request_for("def \\w+_handler", include=["*.ts"])
    with pytest.raises(CursorParamsMismatchError, match="only the cursor"):
        CODEC.decode(TOKEN, params_hash=other.params_hash())


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
    for cls in (CursorMalformedError, CursorSignatureError, CursorParamsMismatchError):
        assert issubclass(cls, CursorError) and issubclass(cls, ValueError)


def test_a_few_seconds_of_clock_skew_between_replicas_is_tolerated() -> None:
    clock = FakeClock()
    token = CursorCodec(SECRET, clock=clock).encode(STATE)
    clock.advance(-3)  # the replica reading it runs 3 s behind the one that minted it
    assert CursorCodec(SECRET, clock=clock).decode(token) == STATE
    clock.advance(-10)
    with pytest.raises(CursorExpiredError, match="future"):
        CursorCodec(SECRET, clock=clock).decode(token)
