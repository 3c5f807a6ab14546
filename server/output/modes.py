"""Output modes and the size ceiling that decides between them.

The decision is a pure function so the whole matrix (mode x fits x max_output_tokens) can be
tested without building responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from server.output.jsontext import byte_size, estimate_tokens

#: Below this even an empty page's envelope (search, pagination, metadata) may not fit, so a
#: smaller `max_output_tokens` is refused up front instead of producing a useless answer.
MIN_OUTPUT_TOKENS = 256


class OutputMode(str, Enum):
    """How a page reaches the agent.

    AUTO: inline when it fits the ceiling, else a file_ref. INLINE: never offload; cut the page
    (losslessly) to fit. FILE_REF: always offload. LEGACY: the bare JSON array of records as
    text, no wrapper, for clients written before structured output.
    """

    AUTO = "auto"
    INLINE = "inline"
    FILE_REF = "file_ref"
    LEGACY = "legacy"

    @classmethod
    def parse(cls, value: str | OutputMode) -> OutputMode:
        """The mode named `value`; a clear error listing the choices otherwise."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"output_mode must be one of {choices}; got {value!r}") from None


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The largest response we answer inline: an estimated-token and a byte limit, and for
    clients that cut tool output by lines (Codex CLI: 256), a line limit on the text block."""

    tokens: int
    bytes: int
    lines: int | None = None

    def fits(self, text: str) -> bool:
        return estimate_tokens(text) <= self.tokens and byte_size(text) <= self.bytes

    def fits_text(self, text: str) -> bool:
        """`fits`, and within the line limit (counted as a client splitting on newlines would)."""
        return self.fits(text) and (self.lines is None or text.count("\n") + 1 <= self.lines)

    def lowered_to(self, max_output_tokens: int | None) -> Ceiling:
        """This ceiling, or a tighter one when the caller asked for small answers."""
        if max_output_tokens is None or max_output_tokens >= self.tokens:
            return self
        return Ceiling(tokens=max_output_tokens, bytes=self.bytes, lines=self.lines)


def select_mode(requested: OutputMode, *, fits: bool, wants_small: bool) -> OutputMode:
    """The mode a page is actually rendered in.

    In AUTO, a page over the ceiling normally goes to a file; but a caller that set
    `max_output_tokens` (`wants_small`) asked for a short inline answer, so the page is cut to
    fit instead (losslessly: the next cursor resumes at the first omitted result).
    """
    if requested is not OutputMode.AUTO:
        return requested
    if fits or wants_small:
        return OutputMode.INLINE
    return OutputMode.FILE_REF
