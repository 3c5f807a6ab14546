"""Where a C-family file's documentation lives: how many of its declarations carry a doc comment.

A C or C++ library keeps each part's declarations in a header and its implementation in a source
file beside it (`src/idna.h`, `src/idna.c`). Which of the two answers a question about that part
depends on where its authors wrote the explanation: libuv comments its `.c` files and leaves its
internal headers bare, while many C++ libraries document their API in the headers, one comment
above each declaration, and keep the `.cc` files terse. The path cannot tell these apart; the
code can, so the path priors (`search_engine.ranking.priors.documented_headers`) compare the two
files' counts from here.

A documented declaration is a code line that directly follows a comment (no blank line between),
not counting the file's opening comment (a licence or file banner sits above the first code line
whatever the file holds) nor preprocessor lines (`#include` under a banner is not documented).
The text comes from the index's chunks, which cover the file; lines no chunk holds count as
blank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from search_engine.chunking.chunk import Chunk

# A line that opens, continues or closes a comment: `//`, `///`, `/*`, `/**`, ` * ...`, ` */`.
_COMMENT_LINE_RE = re.compile(r"^\s*(?://|/\*|\*)")


def documented_declarations(chunks: Iterable[Chunk]) -> int:
    """How many declarations of the file whose `chunks` these are sit directly under a comment
    (see the module doc)."""
    lines: dict[int, str] = {}
    for chunk in chunks:
        for offset, line in enumerate(chunk.content.splitlines()):
            lines.setdefault(chunk.line_start + offset, line)
    count = 0
    in_block = after_comment = seen_code = False
    for number in range(1, max(lines, default=0) + 1):
        text = lines.get(number, "").strip()
        if not text:
            after_comment = False
            continue
        comment = in_block or _COMMENT_LINE_RE.match(text) is not None
        if comment:
            # A `/*` left open on this line keeps the following lines inside the comment.
            opened = text.rfind("/*")
            in_block = opened > text.rfind("*/") if opened >= 0 else in_block and "*/" not in text
            after_comment = True
            continue
        if after_comment and seen_code and not text.startswith("#"):
            count += 1
        after_comment = False
        seen_code = True
    return count
