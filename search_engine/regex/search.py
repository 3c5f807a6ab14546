"""Regex search: run `rg --json`, turn its event stream into `Match` objects.

Parsing rg's JSON is the hot path (a common pattern over a large tree yields hundreds of
thousands of events), so:

- events are decoded with msgspec straight into small typed structs that name only the fields
  we use; everything else (submatch texts, per-file stats) is skipped by the C decoder instead
  of being built into dicts (2.5x faster than `orjson`, 9x faster than `json`);
- rg runs with its parallel walker and the results are sorted afterwards: `rg --sort path`
  forces rg onto one thread, which measured slower than sorting here (benchmarks/regex.py);
- rg prints each file's events contiguously, so sorting is per file, and a file that cannot
  make the first `max_results` any more is only counted, never turned into `Match` objects.
- the garbage collector is left alone. Pausing it around the parse (`gc.disable`, then
  `gc.freeze`/`unfreeze` to age the new objects) once saved a quarter of the parse's CPU, but
  the switch is process-wide: it raced between concurrent searches, and it moved every other
  thread's young cyclic garbage into the oldest generation, where CPython's heuristics then
  seldom collect it (the HTTP server grew ~25 KB per search). With `Match` and the event
  structs untracked (`gc=False`) the pause no longer measured faster.

Order is path (Python string order of the posix path), then position in the file. That order
does not depend on thread timing, which is what makes results repeatable and cursors valid.

A file in which rg meets a NUL byte is binary and contributes nothing, even if it matched
before the NUL: rg's binary detection depends on how much it had read, so keeping those early
matches would make results vary between runs.
"""

from __future__ import annotations

import re
import time
from collections import deque
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec

from search_engine.config import EngineConfig
from search_engine.errors import InvalidQueryError, SearchError
from search_engine.files.discovery import Walk, explicit_file_warning, plan_walk, shown_path
from search_engine.files.languages import language_for
from search_engine.files.paths import SearchLocation
from search_engine.models import Match, MatchType, SearchRequest, SearchResult
from search_engine.regex.ripgrep import RipgrepRun

ELLIPSIS = "…"
_MAX_WARNINGS = 20


class _Text(msgspec.Struct, gc=False):
    """rg's "arbitrary data": `text` when valid UTF-8, else base64 `bytes` (decoded by msgspec)."""

    text: str | None = None
    raw: bytes | None = msgspec.field(default=None, name="bytes")

    def decoded(self) -> str:
        return self.text if self.text is not None else (self.raw or b"").decode("utf-8", "replace")

    def encoded(self) -> bytes:
        return self.raw if self.raw is not None else (self.text or "").encode()


class _Span(msgspec.Struct, gc=False):
    start: int
    end: int


class _Lines(msgspec.Struct, gc=False):
    lines: _Text
    line_number: int
    absolute_offset: int
    submatches: list[_Span]


class _BeginData(msgspec.Struct, gc=False):
    path: _Text


class _EndData(msgspec.Struct, gc=False):
    binary_offset: int | None = None


class _Begin(msgspec.Struct, tag="begin", tag_field="type", gc=False):
    data: _BeginData


class _Hit(msgspec.Struct, tag="match", tag_field="type", gc=False):
    data: _Lines


class _Context(msgspec.Struct, tag="context", tag_field="type", gc=False):
    data: _Lines


class _End(msgspec.Struct, tag="end", tag_field="type", gc=False):
    data: _EndData


class _Summary(msgspec.Struct, tag="summary", tag_field="type", gc=False):
    pass


_decode_lines = msgspec.json.Decoder(_Begin | _Hit | _Context | _End | _Summary).decode_lines


def rg_walk(request: SearchRequest, config: EngineConfig) -> tuple[list[str], Walk]:
    """The full rg command line (minus the binary) for `request`, and its walk."""
    args = ["--json"]
    if request.ignore_case:
        args.append("--ignore-case")
    if request.fixed_string:
        args.append("--fixed-strings")
    if request.whole_word:
        args.append("--word-regexp")
    if request.multiline:
        args.append("--multiline")
    if request.context_lines:
        args += ["--context", str(request.context_lines)]
    args += ["--regexp", request.query]
    walk = plan_walk(SearchLocation(Path(request.root), request.path), config, request.include, request.exclude)
    return walk.command(args), walk


def regex_search(request: SearchRequest, config: EngineConfig) -> SearchResult:
    """Run `request` (a regex-mode request with a resolved root) to completion."""
    if not request.query:
        raise InvalidQueryError("the pattern is empty; pass a regex such as 'TODO' or 'def \\w+'")
    started = time.perf_counter()
    args, walk = rg_walk(request, config)  # first: it refuses a path in codepager's cache
    oversized = explicit_file_warning(SearchLocation(Path(request.root), request.path), config.max_file_size)
    if oversized is not None:
        return SearchResult(matches=[], total_count=0, warnings=[*walk.warnings, oversized])
    collector = _Collector(request.max_results)
    reader = _EventReader(request, config.max_line_width, collector)
    with RipgrepRun(args, Path(request.root), config) as run:
        produced = False
        for buffer in run.records():
            produced = True
            reader.feed(buffer)
        returncode, stderr = run.finish()
        if returncode == 2:
            _raise_if_bad_pattern(stderr, request.query)
        complaints = run.warnings(produced)
    if len(complaints) > _MAX_WARNINGS:
        complaints = [*complaints[:_MAX_WARNINGS], f"... and {len(complaints) - _MAX_WARNINGS} more"]
    matches = collector.matches()
    return SearchResult(
        matches=matches,
        total_count=collector.total,
        truncated=collector.total > len(matches),
        search_time_ms=(time.perf_counter() - started) * 1000,
        warnings=[*walk.warnings, *complaints],
        notices=walk.notices(run.skipped),
    )


class _File:
    """The matches of one file while its events stream in."""

    __slots__ = ("count", "keep", "language", "matches", "path")

    def __init__(self, path: str, keep: bool) -> None:
        self.path = path
        self.language = language_for(path)
        self.matches: list[Match] = []
        self.count = 0
        self.keep = keep


class _Collector:
    """Keeps the first `limit` matches in path order without holding all of them.

    Files arrive in thread-timing order. Once more than twice `limit` matches are held, the
    files are sorted and those past the first `limit` matches are dropped; `cutoff` (the last
    path kept) then tells later files whether they can still make the cut, and a file stops
    keeping its matches at `limit` (`_EventReader.feed`). Memory stays bounded by about 2x
    `limit` and the total stays exact.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._files: list[_File] = []
        self._held = 0
        self._cutoff: str | None = None

    def wants(self, path: str) -> bool:
        return self._cutoff is None or path < self._cutoff

    def add(self, file: _File) -> None:
        self.total += file.count
        if not file.matches:
            return
        self._files.append(file)
        self._held += len(file.matches)
        if self._held >= 2 * self.limit:
            self._keep_first()

    def _keep_first(self) -> None:
        self._files.sort(key=_file_path)
        kept, held = [], 0
        for file in self._files:
            if held >= self.limit:
                break
            kept.append(file)
            held += len(file.matches)
        self._files, self._held, self._cutoff = kept, held, kept[-1].path

    def matches(self) -> list[Match]:
        if self._files:
            self._keep_first()
        out: list[Match] = []
        for file in self._files:
            out += file.matches
        del out[self.limit :]
        return out


def _file_path(file: _File) -> str:
    return file.path


class _EventReader:
    """Turns decoded rg events into `Match` objects on the current `_File`.

    `feed` is the hot loop of every regex search, hence written flat with local names: one
    method call or attribute lookup per event more costs measurably on 10^5 events.
    """

    def __init__(self, request: SearchRequest, width: int, collector: _Collector) -> None:
        self.root = Path(request.root)
        self.width = width
        self.multiline = request.multiline
        self.context = request.context_lines
        self.collector = collector
        self.file = _File("", keep=False)
        # Context mode only: the context lines since the last match (the next match's
        # "before"), and the last match, held open until its "after" lines have arrived.
        self.before: deque[tuple[int, str]] = deque(maxlen=self.context or 1)
        # `Match`'s fields in order, the last ("after" lines) a list still growing.
        self.pending: list[Any] | None = None
        self.pending_end = 0

    def feed(self, buffer: bytes) -> None:
        try:
            events = _decode_lines(buffer)
        except msgspec.DecodeError as exc:
            raise SearchError(f"could not read ripgrep's output ({exc}); is `rg` version 14?") from None
        width, multiline, context = self.width, self.multiline, self.context
        file = self.file
        matches, keep = file.matches, file.keep
        regex, limit = MatchType.REGEX, self.collector.limit
        for event in events:
            kind = type(event)
            if kind is _Hit:
                file.count += 1
                if not keep:
                    continue
                if len(matches) >= limit:
                    # The first `limit` matches of a file are all the search can keep of it: the
                    # rest are only counted, so one file of 10^6 matches costs no more than 10^4.
                    self._close()
                    keep = file.keep = False
                    continue
                d = event.data
                lines = d.lines
                text = lines.text
                if text is None:
                    text = lines.decoded()
                line = d.line_number
                offset = d.absolute_offset
                subs = d.submatches
                if subs:
                    start, end = offset + subs[0].start, offset + subs[-1].end
                else:
                    start, end = offset, offset + len(lines.encoded())
                content = text.rstrip("\r\n")
                if len(content) > width:
                    content = _cut_around(content, lines.encoded(), start - offset, end - offset, width)
                end_line = line + text.count("\n", 0, -1) if multiline else line
                if context:
                    self._open(line, end_line, start, end, content)
                else:
                    matches.append(Match(file.path, line, end_line, start, end, content, regex, file.language))
            elif kind is _Context:
                if keep:
                    self._context(event.data)
            elif kind is _Begin:
                path = event.data.path
                shown = path.text if path.text is not None else shown_path(self.root, path.raw or b"")
                # "" (no rg path is empty): a look-alike left out, read past and not counted
                file = self.file = _File(shown or "", keep=shown is not None and self.collector.wants(shown))
                matches, keep = file.matches, file.keep
            elif kind is _End:
                self._close()
                self.before.clear()
                if event.data.binary_offset is None and file.path:
                    self.collector.add(file)

    def _open(self, line: int, end_line: int, start: int, end: int, content: str) -> None:
        """Context mode: start a match whose "after" lines are still to come."""
        self._close()
        first = line - self.context
        before = tuple(text for number, text in self.before if number >= first)
        self.before.clear()
        file = self.file
        self.pending = [
            file.path,
            line,
            end_line,
            start,
            end,
            content,
            MatchType.REGEX,
            file.language,
            None,
            before,
            [],
        ]
        self.pending_end = end_line

    def _context(self, d: _Lines) -> None:
        text = _cut(d.lines.decoded().rstrip("\r\n"), 0, 0, self.width)
        if self.pending is not None and d.line_number <= self.pending_end + self.context:
            self.pending[-1].append(text)
        self.before.append((d.line_number, text))

    def _close(self) -> None:
        """Context mode: the open match is complete (next match or end of its file)."""
        pending = self.pending
        if pending is not None:
            pending[-1] = tuple(pending[-1])
            self.file.matches.append(Match(*pending))
            self.pending = None


def _cut_around(text: str, encoded: bytes, start_b: int, end_b: int, width: int) -> str:
    """`_cut` for a match given as byte offsets into the line's bytes."""
    start = len(encoded[:start_b].decode("utf-8", "replace"))
    end = start + len(encoded[start_b:end_b].decode("utf-8", "replace"))
    return _cut(text, start, end, width)


def _cut(text: str, start: int, end: int, width: int) -> str:
    """At most `width` characters of `text` showing [start, end) as centred as possible, with
    an ellipsis at each end that was cut. Cuts between code points, never inside one."""
    if len(text) <= width:
        return text
    left = start if end - start >= width else max(0, min(start - (width - (end - start)) // 2, len(text) - width))
    right = left + width
    return (ELLIPSIS if left > 0 else "") + text[left:right] + (ELLIPSIS if right < len(text) else "")


_CARET = re.compile(r"^\s*\^+\s*$")


def _raise_if_bad_pattern(stderr: str, pattern: str) -> None:
    """Turn rg's pattern complaints into InvalidQueryError, with the position when known."""
    if 'the literal "\\n" is not allowed' in stderr:
        raise InvalidQueryError(
            "the pattern contains a line break, which only multiline search can match; "
            "enable multiline (-U) or remove the line break"
        )
    if "exceeds size limit" in stderr:
        raise InvalidQueryError(
            f"the pattern compiles to more than ripgrep's size limit ({stderr.strip().removeprefix('rg: ')}); "
            "use fewer or smaller repetitions (e.g. \\w{1000}) and alternatives, or split the search"
        )
    if "regex parse error" not in stderr:
        return
    lines = stderr.splitlines()
    reason = next((ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")), "invalid regex")
    position = _caret_position(lines, pattern)
    if position is None:
        position = _unbalanced_at(pattern)
    where = f" at position {position}" if position is not None else ""
    raise InvalidQueryError(
        f"invalid regex{where}: {reason} (pattern {pattern!r}); escape special characters "
        "with a backslash or search literally with fixed_string (-F)",
        position=position,
    )


def _caret_position(lines: list[str], pattern: str) -> int | None:
    """Where rg's caret line points inside `pattern`, or None if it points elsewhere.

    rg prints the regex it compiled, which wraps the pattern (`(?:PATTERN)`), with a caret
    line under the offending part; the offset of the pattern inside the printed line maps the
    caret back. The wrapper itself takes the blame for unbalanced groups (the pattern's `(`
    is closed by the wrapper's `)`): then the caret lies outside the pattern and None is
    returned.
    """
    for shown, caret in pairwise(lines):
        if _CARET.match(caret):
            at = shown.find(pattern) if pattern else -1
            position = caret.index("^") - at
            return position if at >= 0 and 0 <= position < len(pattern) else None
    return None


def _unbalanced_at(pattern: str) -> int | None:
    """Position of the first unopened `)`, else the last unclosed `(`, else a trailing lone
    backslash: the culprits rg blames on its own wrapper. Escapes and classes are skipped."""
    opened: list[int] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i == len(pattern) - 1:
                return i
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            # a `]` right after `[` or `[^` is a literal, not the end of the class
            i += 1
            i += pattern.startswith("^", i)
            i += pattern.startswith("]", i)
            in_class = True
            continue
        elif char == "(":
            opened.append(i)
        elif char == ")":
            if not opened:
                return i
            opened.pop()
        i += 1
    return opened[-1] if opened else None
