"""Code-aware tokenization shared by the lexical index and the query side.

Code names things by gluing words together (`ClientSession`, `read_chunk_size`, `http2`), and
people ask in plain words ("client session"). So an identifier is indexed both whole and split
into its parts; everything is lowercased. The whole form keeps exact identifier queries sharp
(`clientsession` is rare, so its IDF is high); the parts let natural-language queries reach it.
Paths carry meaning too (`web_urldispatcher.py` is about URL dispatching), so a chunk's file
stem and nearby directory names are tokenized the same way and added to its document.

Words are reduced to their Snowball stem (`parsed`/`parsing` -> `pars`, `quantization`/
`quantize` -> `quantiz`) so a question's inflection need not match the code's; a compound
identifier's whole form is kept unstemmed, since it is a name, not a word.

Queries additionally drop English stopwords: they carry no signal in a question like "how is
the retry logic handled" yet would otherwise match every docstring. And a question's word that
code usually abbreviates brings the abbreviation along ("implementations" finds `impls.rs`,
"callbacks" `cb`, "configuration" `cfg`), from a table of the common ones (`ABBREVIATIONS`).
Left out are abbreviations that are keywords or names nearly every function uses (`fn`,
`async`, `args`, `req`, `resp`, `obj`, `err`, `val`, `str`, `len`, `src`, `lib`): they match
everywhere, and adding `args` alone cost a Python benchmark query 0.08.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain
from pathlib import PurePosixPath

import Stemmer

from search_engine.errors import InvalidQueryError

# A run of letters, digits and underscores that starts with a letter or underscore (Unicode
# aware: `\w` covers non-ASCII identifiers).
_IDENTIFIER_RE = re.compile(r"[^\W\d]\w*")
# camelCase / PascalCase / acronym / digit boundaries: "getHTTPResponse2" -> get HTTP Response 2
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# Single characters (`i`, `x`, `_`) are noise in code and never what a query is about.
MIN_TOKEN_LEN = 2

# The longest semantic or hybrid query: a description of code, never a document. Every step of a
# query (tokens, terms, file-name words, symbols) grows with it, so a hostile client's megabyte
# of words is refused before any of them runs.
MAX_QUERY_CHARS = 10_000

# How many parent directories of a file contribute tokens: enough for `fastapi/security/` to
# say "security", not so many that every file shares the repo's top folder name.
PATH_DIR_DEPTH = 2

# fmt: off
STOPWORDS: frozenset[str] = frozenset({
    "a", "about", "above", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being",
    "but", "by", "can", "could", "did", "do", "does", "doing", "done", "during", "each", "either", "etc", "for", "from",
    "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "itself", "just", "let", "lets", "may", "me", "might", "more", "most", "must", "my", "no", "nor",
    "not", "of", "off", "on", "once", "only", "onto", "or", "other", "our", "ours", "out", "over", "own", "per",
    "please", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then",
    "there", "these", "they", "this", "those", "though", "through", "to", "too", "under", "until", "up", "upon", "us",
    "use", "used", "uses", "using", "very", "via", "was", "we", "were", "what", "whatever", "when", "where", "whether",
    "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "without", "would", "yet", "you", "your",
})
# fmt: on


_STEMMER = Stemmer.Stemmer("english")

#: Words and the abbreviations code names them by (see the module doc for what is left out).
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "address": ("addr",),
    "administrator": ("admin",),
    "allocate": ("alloc",),
    "allocation": ("alloc",),
    "allocator": ("alloc",),
    "attribute": ("attr",),
    "authentication": ("auth",),
    "authorization": ("auth",),
    "buffer": ("buf",),
    "calculate": ("calc",),
    "callback": ("cb",),
    "command": ("cmd",),
    "configuration": ("config", "cfg"),
    "configure": ("config", "cfg"),
    "connection": ("conn",),
    "context": ("ctx",),
    "database": ("db",),
    "descriptor": ("desc",),
    "destination": ("dst",),
    "directory": ("dir",),
    "document": ("doc",),
    "environment": ("env",),
    "expression": ("expr",),
    "format": ("fmt",),
    "implement": ("impl",),
    "implementation": ("impl",),
    "index": ("idx",),
    "information": ("info",),
    "initialization": ("init",),
    "initialize": ("init",),
    "iterator": ("iter",),
    "manager": ("mgr",),
    "message": ("msg",),
    "number": ("num",),
    "package": ("pkg",),
    "parameter": ("param",),
    "pointer": ("ptr",),
    "previous": ("prev",),
    "properties": ("props",),
    "property": ("prop",),
    "reference": ("ref",),
    "repository": ("repo",),
    "sequence": ("seq",),
    "specification": ("spec",),
    "statistics": ("stats",),
    "synchronization": ("sync",),
    "synchronize": ("sync",),
    "template": ("tmpl", "tpl"),
    "temporary": ("tmp",),
    "transaction": ("tx",),
    "utility": ("util",),
}
# The same table over stems, as the lexical index holds words ("implementations" -> implement).
_ABBREVIATED: dict[str, tuple[str, ...]] = {}
for _word, _short in ABBREVIATIONS.items():
    _stem = _STEMMER.stemWord(_word)
    _ABBREVIATED[_stem] = tuple(dict.fromkeys((*_ABBREVIATED.get(_stem, ()), *_STEMMER.stemWords(list(_short)))))


@lru_cache(maxsize=65536)
def split_identifier(word: str) -> tuple[str, ...]:
    """The tokens of one identifier: its whole form, then its stemmed parts if it has several.

    The whole form is lowercased with underscores removed, so `read_chunk_size`,
    `ReadChunkSize` and `readChunkSize` are one token: naming conventions differ between
    languages and between a query and the code. `ClientSession` -> (clientsession, client,
    session); `parse_headers` -> (parseheaders, pars, header); a plain word is just its stem
    (`parsing` -> pars). Cached: code repeats its identifiers a lot.
    """
    whole = word.replace("_", "").lower()
    parts = [p for piece in word.split("_") if piece for p in word_parts(piece)]
    parts = [p for p in parts if len(p) >= MIN_TOKEN_LEN and not p.isdigit()]
    if len(parts) <= 1 and (not parts or parts[0] == whole):
        return (_STEMMER.stemWord(whole),) if len(whole) >= MIN_TOKEN_LEN else ()
    stems = dict.fromkeys(_STEMMER.stemWords(parts))
    stems.pop(whole, None)
    return (whole, *stems)


def word_parts(piece: str) -> list[str]:
    """Lowercased camelCase parts of an underscore-free piece (`getHTTPResponse2` -> get, http,
    response, 2), unstemmed; non-ASCII pieces stay whole (their case boundaries are not what
    `_CAMEL_RE` knows)."""
    if not piece.isascii():
        return [piece.lower()]
    return [m.lower() for m in _CAMEL_RE.findall(piece)]


def tokenize_text(text: str) -> list[str]:
    """Tokens of a piece of code or prose, in order, identifiers whole and split."""
    # map/chain keep the per-word loop in C: this runs over every chunk of an index build
    return list(chain.from_iterable(map(split_identifier, _IDENTIFIER_RE.findall(text))))


def path_tokens(path: str) -> list[str]:
    """Tokens naming a file: its stem and the last `PATH_DIR_DEPTH` directory names.

    `aiohttp/web_urldispatcher.py` -> web_urldispatcher, web, urldispatcher, aiohttp. The
    extension is left out: it says the language, which filters handle, not the topic.
    """
    return list(_path_tokens(path))


@lru_cache(maxsize=16384)
def _path_tokens(path: str) -> tuple[str, ...]:
    """Cached: every chunk of a file asks for its path's tokens."""
    p = PurePosixPath(path)
    words = [*p.parent.parts[-PATH_DIR_DEPTH:], p.stem]
    return tuple(tokenize_text(" ".join(w for w in words if w not in (".", "..", "/"))))


def query_terms(query: str, abbreviate: bool = True) -> list[str]:
    """The lexical terms of a query: tokenized like code, free-standing English stopwords
    removed (checked before stemming: `does` is a stopword, its stem `doe` is not a word).
    Inside an identifier nothing is dropped: `is_valid` is a name. The abbreviations of its
    words (`ABBREVIATIONS`) follow them, once each (unless not `abbreviate`: the ranking rule
    switched off)."""
    terms: list[str] = []
    for word in _IDENTIFIER_RE.findall(query):
        if word.lower() not in STOPWORDS:
            terms.extend(split_identifier(word))
    shortened = [a for t in terms for a in _ABBREVIATED.get(t, ()) if a not in terms] if abbreviate else []
    return terms + list(dict.fromkeys(shortened))


def validate_query(query: str, abbreviate: bool = True) -> list[str]:
    """The query's terms, or InvalidQueryError when it is longer than `MAX_QUERY_CHARS` or has
    nothing to search for.

    Both semantic and hybrid modes call this first, so "", "   " and "how is the" fail the
    same way in every mode, with a message telling the caller what to send instead.
    """
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidQueryError(
            f"the query is {len(query):,} characters, over the {MAX_QUERY_CHARS:,} a semantic or hybrid query may "
            "have; describe the code in a sentence or two, or search for an exact text with regex_search"
        )
    if not query.strip():
        raise InvalidQueryError("the query is empty; describe the code you are looking for, e.g. 'retry logic'")
    terms = query_terms(query, abbreviate)
    if not terms:
        raise InvalidQueryError(
            f"the query {query!r} has only stopwords or punctuation; "
            "add a word that names what you are looking for, e.g. 'how is the retry handled'"
        )
    return terms
