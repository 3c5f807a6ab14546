"""Hostile cursors through the real MCP path (in-memory fastmcp Client): random strings,
truncations, re-encodings, cursors replayed with another search, sealed with another secret,
sealed at any time from 1970 past the year 9999, of the wrong JSON type. Every one is JSON-RPC
-32602 with a message that says what to do, never a crash, and the server keeps paging
correctly afterwards."""

from __future__ import annotations

import base64
import time
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.app import build_app
from sessions import CursorCodec
from sessions.cursor import CLOCK_SKEW_S
from tests.code_tree import write_code_tree
from tests.hostile_helpers import SyncClient
from tests.server_helpers import SECRET, make_settings, structured

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MAX_AGE_S = 3600
# The last second datetime can hold (9999-12-31T23:59:59 UTC): cursors say when they were signed.
LAST_DATETIME_S = 253_402_300_799


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cursors")
    settings = make_settings(write_code_tree(tmp / "repo"), tmp, sessions={"cursor_max_age_s": MAX_AGE_S})
    sync = SyncClient(build_app(settings))
    yield sync
    sync.close()


@pytest.fixture(scope="module")
def cursor(client) -> str:
    first = structured(client.call("regex_search", {"pattern": "needle", "page_size": 10}))
    cursor: str = first["pagination"]["next_cursor"]
    return cursor


def still_serves(client: SyncClient, cursor: str) -> None:
    page = structured(client.call("regex_search", {"cursor": cursor}))
    assert page["pagination"]["offset"] == 10 and page["results"]["count"] == 10


def test_every_truncation_is_refused(client, cursor):
    for n in sorted({0, 1, 2, len(cursor) // 3, len(cursor) // 2, len(cursor) - 2, len(cursor) - 1}):
        client.refused("regex_search", {"cursor": cursor[:n]} if n else {"cursor": ""})
    still_serves(client, cursor)


def test_re_encodings_are_refused(client, cursor):
    key_id, body = cursor[:8], cursor[8:]
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    standard = cursor.replace("-", "+").replace("_", "/")
    variants = {
        "padded": cursor + "=" * (-len(body) % 4 or 4),
        "standard base64": standard if standard != cursor else cursor + "+",
        "url-quoted twice": urllib.parse.quote(urllib.parse.quote(cursor + "=")),
        "json-quoted": f'"{cursor}"',
        "whitespace": f" {cursor}\n",
        "re-encoded body": key_id + base64.b64encode(raw).decode(),
        "key id upper-cased": key_id.upper() + body if key_id.upper() != key_id else "G" + cursor[1:],
        "dotted like the old format": f".{body}.{key_id}",
        "doubled": cursor + cursor,
        "upper-cased": cursor.upper(),
    }
    for name, variant in variants.items():
        assert variant != cursor, name
        message = client.refused("regex_search", {"cursor": variant})
        assert "cursor" in message.lower(), name
    still_serves(client, cursor)


def test_cursor_replayed_with_another_search_is_refused(client, cursor):
    message = client.refused("regex_search", {"cursor": cursor, "pattern": "return"})
    assert "differ" in message
    other = structured(client.call("regex_search", {"pattern": "return", "page_size": 5}))["pagination"]["next_cursor"]
    client.refused("regex_search", {"cursor": other, "pattern": "needle"})


def test_cursor_signed_with_another_secret_is_refused(client, cursor):
    from sessions.cursor import SEARCH_KIND

    state = CursorCodec(SECRET).decode(cursor, kind=SEARCH_KIND)
    foreign = CursorCodec("another-server-secret-0123456789").encode(state)
    assert "different server key" in client.refused("regex_search", {"cursor": foreign})


@pytest.mark.parametrize("skew_s", [10**6, 10**9, -(10**6)])
def test_far_future_and_ancient_timestamps_are_refused(client, cursor, skew_s):
    from sessions.cursor import SEARCH_KIND

    state = CursorCodec(SECRET).decode(cursor, kind=SEARCH_KIND)
    shifted = CursorCodec(SECRET, clock=lambda: time.time() + skew_s).encode(state)
    assert "expired" in client.refused("regex_search", {"cursor": shifted})


def signed_at(cursor: str, skew_s: int) -> str:
    """The genuine cursor's state signed with the right key, `skew_s` seconds from now."""
    from sessions.cursor import SEARCH_KIND

    state = CursorCodec(SECRET).decode(cursor, kind=SEARCH_KIND)
    return CursorCodec(SECRET, clock=lambda: time.time() + skew_s).encode(state)


# Signing times relative to now. A cursor is valid from 0 to MAX_AGE_S seconds old; the bands of
# +-2 s around both edges are left out, as the wall clock moves while a call is served.
SKEWS = st.one_of(
    st.integers(1 - int(time.time()), -MAX_AGE_S - 3),  # from 1970-01-01T00:00:01 to just expired
    st.integers(-MAX_AGE_S - 60, -MAX_AGE_S + 60).filter(lambda s: abs(s + MAX_AGE_S) > 2),  # around max age
    st.integers(-MAX_AGE_S + 3, int(CLOCK_SKEW_S) - 2),  # valid (a little ahead is clock skew)
    st.integers(int(CLOCK_SKEW_S) + 2, LAST_DATETIME_S - int(time.time())),  # from just past the skew to the year 9999
)


@FUZZ
@given(skew_s=SKEWS)
def test_fuzz_signing_times(client, cursor, skew_s):
    """Authentic cursors signed at any time: older than the max age or dated in the future ->
    -32602 saying it expired and why; otherwise the page is served."""
    shifted = signed_at(cursor, skew_s)
    if -MAX_AGE_S < skew_s < CLOCK_SKEW_S:
        still_serves(client, shifted)
        return
    message = client.refused("regex_search", {"cursor": shifted})
    assert "expired" in message and "without a cursor" in message
    assert ("dated in the future" if skew_s > 0 else "s old") in message


@pytest.mark.parametrize("skew_s", [LAST_DATETIME_S + 1, 10**12, 2**62], ids=["year-10000", "year-33658", "2**62"])
def test_signing_times_past_the_year_9999_are_refused(client, cursor, skew_s):
    client.refused("regex_search", {"cursor": signed_at(cursor, skew_s - int(time.time()))})


@pytest.mark.parametrize("value", [0, 12, -1, 1.5, True, [], ["a"], {}, {"cursor": "x"}, "\x00" * 8, "é" * 50])
def test_cursors_of_the_wrong_type_or_alphabet_are_refused(client, value):
    client.refused("regex_search", {"cursor": value})


def test_a_megabyte_cursor_is_refused(client, cursor):
    client.refused("regex_search", {"cursor": "A" * 1_000_000})
    client.refused("regex_search", {"cursor": cursor + "." + "A" * 1_000_000})
    still_serves(client, cursor)


@FUZZ
@given(junk=st.text(max_size=300))
def test_fuzz_random_strings(client, junk):
    client.refused("regex_search", {"cursor": junk})


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_cursors(client, cursor, data):
    """One edit anywhere in a genuine cursor: replace, insert or delete a character."""
    i = data.draw(st.integers(0, len(cursor) - 1))
    char = data.draw(st.characters(codec="ascii") | st.sampled_from("-_.=+/"))
    mutated = data.draw(
        st.sampled_from(
            [cursor[:i] + char + cursor[i + 1 :], cursor[:i] + char + cursor[i:], cursor[:i] + cursor[i + 1 :]]
        )
    )
    if mutated == cursor:
        return
    client.refused("regex_search", {"cursor": mutated})


@pytest.mark.parametrize("mode", [None, "semantic", "hybrid"])
def test_a_regex_cursor_is_not_accepted_by_another_tool(client, cursor, mode):
    client.refused("hybrid_search", {"cursor": cursor} if mode is None else {"cursor": cursor, "mode": mode})
