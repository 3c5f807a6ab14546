"""Packed index tables (msgpack) that decode to far more memory than their size: an array of
11 million empty arrays is 11 MB on disk and about 1 GB of Python lists. Whoever can write in
the cache dir can plant one (see test_crafted_index_index_links.py). Found by an audit and kept as
a known limit until the tables were decoded by type. The searches run in a child process under
an address-space cap."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest

from tests.crafted_index_helpers import MB, build, search_in_child
from tests.index_helpers import CountingEmbedder, write_repo

#: 11 million items: 11 MB of msgpack, as in the audit.
_ITEMS = 11_000_000
_EMPTY_ARRAY, _EMPTY_STR = b"\x90", b"\xa0"


def _array_of_empty_arrays() -> bytes:
    return b"\xdd" + struct.pack(">I", _ITEMS) + _EMPTY_ARRAY * _ITEMS


def _strings_table() -> bytes:
    """strings.msgpack whose `paths` is the array of empty arrays."""
    key = b"\xa5paths"
    return b"\x81" + key + _array_of_empty_arrays()


def _file_table() -> bytes:
    """files.msgpack: a map of 4 million distinct short paths, each to an empty array (24 MB)."""
    count = 4_000_000
    digits = [bytes([b]) for b in range(0x21, 0x7F)]  # printable ASCII: 94**4 distinct keys
    keys = (b"\xa4" + a + b + c + d for a, b, c, d in itertools.product(digits, repeat=4))
    entries = b"".join(key + _EMPTY_ARRAY for key in itertools.islice(keys, count))
    return b"\xdf" + struct.pack(">I", count) + entries


def _lexical_meta() -> bytes:
    """lexical.json whose file list is 6 million empty arrays (18 MB of JSON)."""
    return b'{"version": 4, "chunks": 1, "files": [' + b"[]," * 6_000_000 + b"[]]}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("part", "craft"),
    [
        ("chunks/strings.msgpack", _strings_table),
        ("files.msgpack", _file_table),
        ("lexical/vocab.msgpack", _array_of_empty_arrays),
        ("lexical/lexical.json", _lexical_meta),
    ],
)
def test_a_packed_table_of_empty_arrays_is_damage_found_in_bounded_memory(
    tmp_path: Path, counting: CountingEmbedder, part: str, craft: object
) -> None:
    """Before: each table was decoded whole, any value of any type, and only then checked: the
    search peaked at 834 MB (strings.msgpack), 857 MB in 11.7 s (files.msgpack), 1,585 MB in
    7.4 s (vocab.msgpack) and 909 MB (lexical.json) before the table was found damaged. Now
    each table is decoded as the types it holds (`search_engine.index.packed`), so the first empty
    array where a path or a token belongs is damage: the search rebuilds the index and
    answers, at about 120 MB peak RSS in 0.3 s (asserted: under 400 MB)."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    assert callable(craft)
    data = craft()
    assert len(data) >= 10 * MB
    (gen / part).write_bytes(data)

    report = search_in_child(repo, cache, address_space=3 << 30, timeout_s=90)

    assert report.get("matches"), f"{part}: {report}"
    assert report.get("generation", 0) > int(gen.name.split("-")[1]), f"{part}: not rebuilt: {report}"
    assert report.get("peak_rss", 1 << 40) < 400 * MB, f"{part}: {report.get('peak_rss', 0) // MB} MB: {report}"


def test_definition_names_of_empty_arrays_are_damage_found_in_bounded_memory(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    """defs.names.msgpack is read at the first search that ranks by symbol names, not when the
    generation opens; 11 million empty arrays there are damage too (before: 875 MB peak RSS),
    in bounded memory."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    (gen / "chunks" / "defs.names.msgpack").write_bytes(_array_of_empty_arrays())

    report = search_in_child(repo, cache, address_space=3 << 30, timeout_s=90)

    assert report.get("matches"), f"{report}"
    assert report.get("peak_rss", 1 << 40) < 400 * MB, f"{report.get('peak_rss', 0) // MB} MB: {report}"
