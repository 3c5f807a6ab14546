"""Cutting files into chunks that a search can return whole: one function, one class, one
section of prose.

Why structure and not fixed windows: a window that starts mid-function and ends in the next
one embeds two half-topics, and its hit carries no name. A chunk that is exactly
`ClientSession.close` embeds one topic, and its `symbol` lets ranking match identifier queries.

The walk (one algorithm; the per-language vocabulary is in `search_engine.chunking.grammars`):
- every top-level definition (with its decorators and the comment block right above it) is a
  chunk if it fits in `MAX_CHARS`;
- a larger class or namespace becomes a header chunk (signature, docstring, fields) plus its
  members, recursively, named `Class.member`; a larger function becomes groups of whole
  statements, each still named after the function;
- code between definitions (imports, constants, `if __name__ == ...`) is grouped into
  "module" chunks, so nothing in a file is unsearchable;
- a single node too large for any of that (a huge literal) is cut into line windows.
Files without a grammar (markdown, config, unknown) and files whose top level does not parse
are cut into overlapping line windows; markdown windows break before headings and are named
after them. Chunks stay within `MAX_CHARS` (plus a short signature joined to its body, see
`_HEADER_SLACK`): bounded chunks keep embeddings focused (MiniLM reads ~256 tokens; a static
model's mean just dilutes). Only a single line longer than that is cut mid-line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tree_sitter import Node

from search_engine.chunking.chunk import Chunk, content_hash
from search_engine.chunking.grammars import (
    Definition,
    DefKind,
    LanguageSpec,
    body_of,
    definition_at,
    is_leading,
    parser_for,
    spec_for,
)

# Bumped whenever chunk boundaries, kinds or symbols change: an index built by another
# version is rebuilt rather than mixed.
CHUNKER_VERSION = "4"

# ~250 WordPiece tokens of code: what MiniLM reads before truncating, and on the retrieval
# benchmark the best of 600..2500 for the static model too (smaller chunks stay on one topic).
MAX_CHARS = 1000
WINDOW_OVERLAP_LINES = 3
# A markdown heading starts a new window once the current one holds this much.
_HEADING_BREAK_CHARS = MAX_CHARS // 3
# A signature this short always joins the first piece of its body, even past MAX_CHARS:
# alone it would be a chunk with a name and no content.
_HEADER_SLACK = 300
# Constructs nested deeper than this are cut into line windows instead of being opened up:
# the walk recurses (in Python) once a level, so a hostile file of a few KB such as
# `f(f(f(...)))` 3,000 deep raised RecursionError and failed the whole index build. Real code
# nests definitions a handful of levels deep.
MAX_NESTING = 64
_WORD = re.compile(r"\w")
# Doc comments (`/** ... */`, `///`, `(** ... *)`, Haskell's `-- |`) still document the
# definition after them across one blank line; plain comments do not.
_DOC_COMMENT = re.compile(rb"^\s*(?:/\*\*|///|\(\*\*|--\s*[|^])")
_MD_HEADING = re.compile(rb"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


@dataclass(slots=True)
class _Piece:
    """A chunk before it has text: a byte span plus what it is."""

    start: int
    end: int
    kind: str
    symbol: str | None


class _Lines:
    """Byte offsets of line starts, to move between rows and bytes in O(log n)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        starts = [0]
        find = data.find
        pos = find(b"\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find(b"\n", pos + 1)
        self.starts = starts

    @property
    def count(self) -> int:
        return len(self.starts)

    def start(self, row: int) -> int:
        return self.starts[row]

    def end(self, row: int) -> int:
        """End of `row`, excluding its newline."""
        if row + 1 < len(self.starts):
            return self.starts[row + 1] - 1
        return len(self.data)

    def row_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1


def chunk_file(path: str, data: bytes, language: str | None, *, structured: bool = True) -> list[Chunk]:
    """All chunks of one file's bytes, in file order. `path` is relative to the index root.

    Code with a grammar is chunked by structure (unless `structured` is off: a file whose
    parse outgrew its worker, see `search_engine.chunking.workers`); everything else, and code
    whose top level does not parse, by line windows.

    The parse is not bounded here: an index build calls this only in a chunking worker,
    whose memory is limited (`search_engine.chunking.jobs`)."""
    lines = _Lines(data)
    pieces: list[_Piece] | None = None
    spec = spec_for(language, path, data) if structured else None
    if spec is not None:
        pieces = _code_pieces(lines, spec)
    if pieces is None:
        pieces = _text_windows(lines, markdown=language == "markdown")
    return [chunk for p in pieces if (chunk := _to_chunk(p, path, language, lines)) is not None]


def _to_chunk(piece: _Piece, path: str, language: str | None, lines: _Lines) -> Chunk | None:
    content = lines.data[piece.start : piece.end].decode("utf-8", "replace")
    if not _WORD.search(content):
        return None  # a lone `}` or a blank run: nothing anyone could search for
    return Chunk(
        path=path,
        language=language,
        line_start=lines.row_of(piece.start) + 1,
        line_end=lines.row_of(max(piece.start, piece.end - 1)) + 1,
        byte_start=piece.start,
        byte_end=piece.end,
        content=content,
        kind=piece.kind,
        symbol=piece.symbol,
        content_hash=content_hash(content),
    )


# --- structure-aware chunking -------------------------------------------------------------


def _code_pieces(lines: _Lines, spec: LanguageSpec) -> list[_Piece] | None:
    """Pieces of a parsed file, or None when it did not parse into anything recognisable.

    Tree-sitter recovers from errors, and C/C++ preprocessor tricks yield ERROR nodes around
    perfectly good functions, so errors alone are no reason to give up: definitions are
    still found inside them. Only a file with errors and no definition at all is windowed."""
    root = parser_for(spec).parse(lines.data).root_node
    walker = _Walker(lines, spec)
    children = [g for c in root.children for g in (c.children if c.type in spec.containers else (c,))]
    pieces = walker.block(children, "module", None, "", in_class=False)
    if root.has_error and not walker.definitions:
        return None
    return _merge_neighbours(_disjoint(pieces, lines), lines)


def _disjoint(pieces: list[_Piece], lines: _Lines) -> list[_Piece]:
    """Trim pieces so none overlaps the previous one (two constructs on one line would
    otherwise both claim it); a piece left empty is dropped."""
    out: list[_Piece] = []
    data = lines.data
    for p in pieces:
        if out and p.start < out[-1].end:
            p.start = out[-1].end
            if p.start < len(data) and data[p.start : p.start + 1] == b"\n":
                p.start += 1
        if p.start < p.end:
            out.append(p)
    return out


def _merge_neighbours(pieces: list[_Piece], lines: _Lines) -> list[_Piece]:
    """Join adjacent pieces of the same construct while they fit: splitting a large function
    statement by statement leaves fragments such as a lone `try:` that embed poorly alone."""
    out: list[_Piece] = []
    data = lines.data
    for p in pieces:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.kind == p.kind
            and prev.symbol == p.symbol
            and p.end - prev.start <= MAX_CHARS
            and not data[prev.end : p.start].strip()
        ):
            prev.end = p.end
        else:
            out.append(p)
    return out


def _end_row(node: Node) -> int:
    """Last row a node occupies (a node ending at column 0 ended on the previous line)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point.row else row


class _Walker:
    def __init__(self, lines: _Lines, spec: LanguageSpec) -> None:
        self.lines = lines
        self.spec = spec
        self.definitions = 0
        self.depth = 0  # `block`s open on the stack (see MAX_NESTING)
        self._windowed = (0, -1)  # the rows `windows` cut last

    def span(self, first_row: int, last_row: int) -> tuple[int, int]:
        return self.lines.start(first_row), self.lines.end(last_row)

    def size(self, first_row: int, last_row: int) -> int:
        start, end = self.span(first_row, last_row)
        return end - start

    def block(
        self, children: Sequence[Node], kind: str, symbol: str | None, scope: str, in_class: bool
    ) -> list[_Piece]:
        """Pieces of a sequence of sibling nodes: definitions on their own, the code between
        them grouped. `kind`/`symbol` label that in-between code (the enclosing construct)."""
        if self.depth >= MAX_NESTING:
            return self.windows(children[0].start_point.row, _end_row(children[-1]), kind, symbol) if children else []
        self.depth += 1
        try:
            return self._block(children, kind, symbol, scope, in_class)
        finally:
            self.depth -= 1

    def _block(
        self, children: Sequence[Node], kind: str, symbol: str | None, scope: str, in_class: bool
    ) -> list[_Piece]:
        pieces: list[_Piece] = []
        run: list[Node] = []
        lead: list[Node] = []  # comments and attributes that may lead into the next definition
        last_row = -1  # last row claimed by anything before `lead`
        for child in children:
            if child.type in self.spec.comments or (child.is_named and is_leading(child, self.spec)):
                if lead and child.start_point.row - _end_row(lead[-1]) > 1:
                    run.extend(lead)
                    lead = []
                if lead or child.start_point.row > last_row:
                    lead.append(child)
                else:
                    run.append(child)  # a trailing comment on a line of code
                continue
            definition = definition_at(child, self.spec) if child.is_named else None
            starts_fresh = child.start_point.row > (_end_row(lead[-1]) if lead else last_row)
            if definition is None or not starts_fresh:
                run.extend(lead)
                lead = []
                run.append(child)
                last_row = max(last_row, _end_row(child))
                continue
            attached = lead if lead and self._documents(lead[-1], child) else []
            if not attached:
                run.extend(lead)
            lead = []
            pieces.extend(self.pack(run, kind, symbol, scope, in_class))
            run = []
            first_row = attached[0].start_point.row if attached else child.start_point.row
            pieces.extend(self.definition(definition, first_row, scope, in_class))
            last_row = _end_row(child)
        run.extend(lead)
        pieces.extend(self.pack(run, kind, symbol, scope, in_class))
        return pieces

    def _documents(self, last: Node, definition: Node) -> bool:
        """Whether the lead block ending with `last` belongs to `definition`: adjacent, or a doc
        comment one blank line above it (JSDoc above `obj.method = function`)."""
        gap = definition.start_point.row - _end_row(last)
        if gap <= 1:
            return True
        data = self.lines.data
        return gap == 2 and bool(_DOC_COMMENT.match(data[last.start_byte : last.start_byte + 8]))

    def pack(self, nodes: Sequence[Node], kind: str, symbol: str | None, scope: str, in_class: bool) -> list[_Piece]:
        """Greedily group consecutive non-definition nodes into pieces of at most MAX_CHARS;
        a node too large on its own is opened up (it may hold definitions) or windowed."""
        pieces: list[_Piece] = []
        group_first = group_last = -1

        def flush() -> None:
            nonlocal group_first
            if group_first >= 0:
                pieces.append(_Piece(*self.span(group_first, group_last), kind, symbol))
            group_first = -1

        for node in nodes:
            first, last = node.start_point.row, _end_row(node)
            if self.size(first, last) > MAX_CHARS:
                flush()  # a line it shares with the group is trimmed off it by `_disjoint`
                if node.child_count > 1:
                    pieces.extend(self.block(node.children, kind, symbol, scope, in_class))
                else:
                    pieces.extend(self.windows(first, last, kind, symbol))
                continue
            if group_first >= 0 and first <= group_last:
                group_last = max(group_last, last)  # same line as the group: glue
                continue
            if group_first >= 0 and self.size(group_first, last) > MAX_CHARS:
                flush()
            if group_first < 0:
                group_first = first
            group_last = last
        flush()
        return pieces

    def definition(self, d: Definition, first_row: int, scope: str, in_class: bool) -> list[_Piece]:
        """One piece for a definition that fits; otherwise a header piece and its parts."""
        self.definitions += 1
        # Go methods are declared outside their type, with a receiver: methods all the same.
        kind = _kind_name(d.kind, in_class or d.inner.type == "method_declaration")
        symbol = f"{scope}{d.name}" if d.name else (scope.rstrip(".") or None)
        last_row = _end_row(d.outer)
        if self.size(first_row, last_row) <= MAX_CHARS:
            return [_Piece(*self.span(first_row, last_row), kind, symbol)]
        body = body_of(d.inner)
        if body is None:
            return self.windows(first_row, last_row, kind, symbol)
        inner_scope = f"{symbol}." if symbol else scope
        members = [*_comments_before(body, self.spec), *body.children]
        parts = self.block(members, kind, symbol, inner_scope, in_class=d.kind is DefKind.CLASS)
        parts = [p for p in parts if p.end > p.start]
        if not parts:
            return self.windows(first_row, last_row, kind, symbol)
        tail_end = self.lines.end(last_row)
        if parts[-1].end < tail_end:  # Ruby's `end` lies outside the body node: keep it somewhere
            if tail_end - parts[-1].end <= _HEADER_SLACK:
                parts[-1].end = tail_end
            else:
                parts.extend(self.windows(self.lines.row_of(parts[-1].end) + 1, last_row, kind, symbol))
        head = parts[0]
        head_row = self.lines.row_of(head.start)
        header_start = self.lines.start(first_row)
        is_run = head.kind == kind and head.symbol == symbol
        if is_run and head.end - header_start <= MAX_CHARS + _HEADER_SLACK:
            head.start = header_start  # signature + docstring + first statements/fields
        elif head_row > first_row:
            parts[:0] = self.windows(first_row, head_row - 1, kind, symbol)
        return parts

    def windows(self, first_row: int, last_row: int, kind: str, symbol: str | None) -> list[_Piece]:
        """Line windows over rows of one construct (no overlap: its neighbours are exact).

        Rows inside the ones windowed last are not windowed again: every node sharing an
        over-long line is "too large" and windowed as that whole line, so a one-line minified
        file of n statements made n copies of the line's windows (`_disjoint` then dropped
        all but the first): a 120 KB line cost 8 s and 770 MB, a 1 MB one tens of GB."""
        done_first, done_last = self._windowed
        if done_first <= first_row and last_row <= done_last:
            return []
        self._windowed = (first_row, last_row)
        return [_Piece(s, e, kind, symbol) for s, e in _windows(self.lines, first_row, last_row, overlap=0)]


def _kind_name(kind: DefKind, in_class: bool) -> str:
    if kind is DefKind.FUNCTION and in_class:
        return "method"
    return kind.value


def _comments_before(body: Node, spec: LanguageSpec) -> list[Node]:
    """Comments just before a body among its parent's children: some grammars (Ruby) put the
    comment above a class's first member outside the body node, where it would be cut off the
    member it documents."""
    out: list[Node] = []
    node = body.prev_sibling
    while node is not None and node.type in spec.comments:
        out.append(node)
        node = node.prev_sibling
    return out[::-1]


# --- line windows -------------------------------------------------------------------------


def _windows(
    lines: _Lines, first_row: int, last_row: int, overlap: int, breaks: set[int] | None = None
) -> list[tuple[int, int]]:
    """Byte spans of windows over rows first..last, each at most MAX_CHARS (whole lines;
    a single longer line is cut into MAX_CHARS slices). A window prefers to end at a blank
    line in its second half, and breaks before any row in `breaks` once it is big enough."""
    spans: list[tuple[int, int]] = []
    row = first_row
    data = lines.data
    while row <= last_row:
        start = lines.start(row)
        if lines.end(row) - start > MAX_CHARS:
            spans.extend(_slices(data, start, lines.end(row)))
            row += 1
            continue
        end_row = row
        while end_row < last_row:
            nxt = end_row + 1
            if lines.end(nxt) - start > MAX_CHARS:
                break
            if breaks and nxt in breaks and lines.end(end_row) - start >= _HEADING_BREAK_CHARS:
                break
            end_row = nxt
        if end_row < last_row and not (breaks and end_row + 1 in breaks):
            end_row = _prefer_blank(lines, row, end_row)
        spans.append((start, lines.end(end_row)))
        if end_row >= last_row:
            break
        row = max(row + 1, end_row + 1 - overlap) if not (breaks and end_row + 1 in breaks) else end_row + 1
    return spans


def _prefer_blank(lines: _Lines, first_row: int, end_row: int) -> int:
    """Move a window's end back to the last blank line in its second half, if any."""
    data = lines.data
    for r in range(end_row, first_row + (end_row - first_row) // 2, -1):
        if not data[lines.start(r) : lines.end(r)].strip():
            return r
    return end_row


def _slices(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Cut one over-long line into MAX_CHARS pieces on UTF-8 character boundaries."""
    spans = []
    pos = start
    while pos < end:
        cut = min(pos + MAX_CHARS, end)
        while cut < end and (data[cut] & 0xC0) == 0x80:  # continuation byte: back off
            cut -= 1
        spans.append((pos, cut))
        pos = cut
    return spans


def _text_windows(lines: _Lines, markdown: bool) -> list[_Piece]:
    """Overlapping windows over a whole file; markdown windows start at headings and carry
    the heading they fall under as their symbol."""
    if not lines.data.strip():
        return []
    last_row = lines.count - 1
    while last_row > 0 and lines.start(last_row) == len(lines.data):
        last_row -= 1  # the empty "line" after a final newline
    if not markdown:
        return [_Piece(s, e, "window", None) for s, e in _windows(lines, 0, last_row, WINDOW_OVERLAP_LINES)]
    headings: dict[int, str] = {}
    for row in range(lines.count):
        line = lines.data[lines.start(row) : lines.end(row)]
        if line.lstrip().startswith(b"#"):
            m = _MD_HEADING.match(line)
            if m:
                headings[row] = m.group(1).decode("utf-8", "replace")
    rows = sorted(headings)
    pieces = []
    for s, e in _windows(lines, 0, last_row, WINDOW_OVERLAP_LINES, breaks=set(headings)):
        first, last = lines.row_of(s), lines.row_of(max(s, e - 1))
        # the section the window starts in; before any heading, the first one it reaches
        i = bisect.bisect_right(rows, first) - 1
        at = rows[i] if i >= 0 else next((r for r in rows if r <= last), None)
        symbol = headings[at] if at is not None else None
        pieces.append(_Piece(s, e, "section", symbol))
    return pieces
