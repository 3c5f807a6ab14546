"""A decompression bomb in a generation's chunk text (text.bin): its compressed extent was
checked, what it inflates to was not. Found by an audit. The search runs in a child process
under an address-space cap of 4 GiB."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from search_engine.errors import IndexDamagedError
from search_engine.index.chunk_table import ChunkTable
from tests.crafted_index_helpers import MB, build, file_text, replace_file_text, search_in_child, zlib_bomb
from tests.index_helpers import CountingEmbedder, write_repo


@pytest.mark.slow
def test_chunk_text_inflates_no_further_than_its_rows_reach(tmp_path: Path, counting: CountingEmbedder) -> None:
    """The stored text of app/client.py replaced by a block of about 1 MB that inflates to
    1 GB, its first bytes the real text, so results look normal. Before: a file's chunk text
    was inflated with `zlib.decompress`, unbounded, although the rows say how much of it can
    ever be read: ~2 GB of peak RSS on the first search that showed the file, and the text then
    kept (`_TEXT_CACHE`, 16 files); by hand, a 3 MB text.bin took a search to 6.1 GB peak RSS
    in 12.6 s, answering normally. Now a file's text is inflated no further than its rows reach
    (the most of text_off + text_len): the search stays under 400 MB peak RSS."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    bomb = zlib_bomb(file_text(gen, "app/client.py"), 1024 * MB)
    assert len(bomb) < 1100 * 1024
    replace_file_text(gen, "app/client.py", bomb)

    report = search_in_child(repo, cache, address_space=4 << 30)

    assert report.get("peak_rss", 1 << 40) < 400 * MB, (
        f"a {len(bomb) // 1024} KiB text block took the search to {report.get('peak_rss', 0) // MB} MB: {report}"
    )


def test_a_text_stream_cut_short_is_damage(tmp_path: Path, counting: CountingEmbedder) -> None:
    """A file's compressed text cut in half, the extents still agreeing. Bounding the inflation
    (above) stopped zlib from raising for a stream that ends early, so the chunk text was
    served cut (found by a review). It is damage again: the text must reach as far as its
    chunks."""
    repo = write_repo(tmp_path / "repo")
    gen = build(repo, tmp_path / "cache", counting)
    whole = zlib.compress(file_text(gen, "app/client.py"), 6)
    replace_file_text(gen, "app/client.py", whole[: len(whole) // 2])
    table = ChunkTable(gen / "chunks")
    f = table.paths.index("app/client.py")
    with pytest.raises(IndexDamagedError, match="inflates to"):
        [table[i].content for i in range(len(table)) if int(table.file_of[i]) == f]
