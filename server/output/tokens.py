"""The one token estimator every size decision uses.

Claude Code refuses MCP tool output above ~25,000 tokens, so every "does this fit?" question in
codepager (inline vs file_ref, how far to cut a page, the proxy's threshold) must be answered by
the same function, or two layers would disagree about the same response. The rule is
deliberately simple and a little pessimistic: 4 ASCII characters per token, 1 token per
non-ASCII character (CJK text and emoji tokenize far worse than English).
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(ascii_chars / 4) + non_ascii_chars.

    `str.isascii()` is O(1) on CPython for pure-ASCII strings (a flag on the object), so the
    common case costs nothing; otherwise one C-level encode counts the ASCII characters.
    """
    if text.isascii():
        return (len(text) + 3) // 4
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)
