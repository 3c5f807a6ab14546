"""Manifest fields of the wrong type or out of range: `index_store._manifest` copied whatever the
JSON held, with no type or range check. Found by an audit. The searches run in a child process
under an address-space cap of 4 GiB."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crafted_index_helpers import MB, build, manifest, put_manifest, search_in_child
from tests.index_helpers import CountingEmbedder, write_repo

pytestmark = pytest.mark.slow  # every test here starts processes or builds a large index


def test_a_manifest_count_that_is_a_string_is_refused_before_any_arithmetic(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    """A manifest of under 400 bytes whose `chunks` is a string and whose `dim` is 64,000,000.
    Before: `_read_vectors` computed `chunks * dim` to compare with a file's size, so Python
    built a string of len(chunks) * dim characters and formatted it into the error message: a
    330-byte manifest (`chunks` 50 characters) took a search to 3.5 GB peak RSS and a
    MemoryError under a 6 GB cap (with no cap, ~6.4 GB, then a multi-GB log line). Now every
    field is type- and range-checked before anything is computed from it: the search rebuilds
    the index (generation 2) and answers, under 400 MB peak RSS."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    m = manifest(gen)
    m["chunks"], m["dim"] = "A" * 25, 64_000_000  # 1.6 GB once multiplied
    put_manifest(gen, m)
    assert (gen / "manifest.json").stat().st_size < 400

    report = search_in_child(repo, cache, address_space=4 << 30)

    assert report.get("peak_rss", 1 << 40) < 400 * MB, f"{report}"
    assert "matches" in report and report["generation"] == 2, f"expected a rebuild: {report}"


def test_a_generation_that_is_not_a_number_is_refused(tmp_path: Path, counting: CountingEmbedder) -> None:
    """A manifest whose `generation` is "xxxxxxxxxx". Before: it was served as the index
    generation. Now the manifest is refused, and the search answers with a generation that is
    a number."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    m = manifest(gen)
    m["generation"] = "x" * 10
    put_manifest(gen, m)

    report = search_in_child(repo, cache)

    assert isinstance(report.get("generation"), int), f"served generation {report.get('generation')!r}"
