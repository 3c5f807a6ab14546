"""An updated generation's BM25 postings from the previous one's, without re-sorting them.

Rebuilding the postings after an edit sorted every (document, term) entry of the tree again
(11 s for 100 edited files at twice sympy's size, growing with the tree). But an update only
drops the entries of changed and deleted files, renumbers the rest in the same order, and adds
the few new chunks' entries. So here the kept entries stay where they are, term-major with
ascending documents (renumbering keeps their order), and only the new entries are sorted and
placed among them by binary search: a handful of vectorised passes over the postings plus a
sort of what changed. The vocabulary only grows (new terms are appended), so old term ids
stay valid. The result holds exactly the entries a fresh build would, so every BM25 score is
the same (`tests/test_index.py` compares them).
"""

from __future__ import annotations

import numpy as np

from search_engine.ranking.lexical import LexicalBuilder, LexicalIndex, Postings, file_entries

#: Entries renumbered per `np.take` call (see `_renumbered`).
_SLICE = 1 << 20


def merge(old: LexicalIndex, chunk_map: np.ndarray, file_map: np.ndarray, new: LexicalBuilder,
          new_chunks: np.ndarray, files: list[str]) -> LexicalIndex:  # fmt: skip
    """The postings of a new generation.

    `chunk_map`/`file_map` give each old chunk/file its new id (-1: dropped), increasing over
    the kept ones; `new` holds the added chunks' rows in order (started from `old.tokens`)
    and `new_chunks` their new ids (ascending); `files` are the new generation's file paths,
    whose ids `new`'s paths resolve to."""
    vocab = len(new.tokens)
    size = len(chunk_map) - int(np.count_nonzero(chunk_map < 0)) + len(new_chunks)
    docs, terms, tf, lengths = new.rows()
    chunk_docs = new_chunks[docs].astype(np.int32)
    chunks = _merge(old.chunk_postings, chunk_map, chunk_docs, terms, tf, new_chunks, lengths, size, vocab)
    index = {p: i for i, p in enumerate(files)}
    file_of = np.array([index[p] for p in new.paths], dtype=np.int32)[new.file_of()]
    f_docs, f_terms, f_tf, f_ids, f_lengths = file_entries(file_of, docs, terms, tf, lengths, vocab)
    by_file = _merge(old.file_postings, file_map, f_docs, f_terms, f_tf, f_ids, f_lengths, len(files), vocab)
    return LexicalIndex(list(new.tokens), chunks, by_file, files)


def _merge(
    old: Postings,
    doc_map: np.ndarray,
    docs: np.ndarray,
    terms: np.ndarray,
    tf: np.ndarray,
    new_ids: np.ndarray,
    new_lengths: np.ndarray,
    size: int,
    vocab: int,
) -> Postings:
    """`old`'s kept entries renumbered by `doc_map`, with the new (doc, term, tf) entries
    placed among them; `new_ids` are the new documents, `new_lengths` their token counts.
    Arrays as long as the postings are int32 or smaller, and only a few of them live at once:
    an update of an 8x sympy tree (12.6M entries) stays within a few hundred MB."""
    indptr = np.asarray(old.indptr, dtype=np.int64)
    old_docs = _renumbered(np.asarray(old.docs), doc_map)
    keep = old_docs >= 0
    # The dropped entries (changed and deleted documents') are few: each term's block among
    # the kept entries starts where its old block did, less the dropped entries before it.
    dropped = np.flatnonzero(~keep)
    kept_docs = old_docs[keep]
    del old_docs
    kept_tf = np.asarray(old.tf)[keep]
    del keep
    # Terms new to the vocabulary have no kept entries, and their entries go after every kept
    # one (their ids are above every old term's).
    kept_indptr = np.full(vocab + 1, len(kept_docs), dtype=np.int64)
    kept_indptr[: len(indptr)] = indptr - np.searchsorted(dropped, indptr)
    order = np.lexsort((docs, terms))
    terms, docs, tf = terms[order], docs[order], tf[order]
    # Each new entry goes into its term's block, before the first kept document above it:
    # one binary search per term the new chunks use, over that term's block only.
    slots = np.empty(len(terms), dtype=np.int64)
    bounds = np.flatnonzero(np.diff(terms)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(terms)], strict=True) if len(terms) else ():
        t = int(terms[lo])
        start, end = int(kept_indptr[t]), int(kept_indptr[t + 1])
        slots[lo:hi] = start + np.searchsorted(kept_docs[start:end], docs[lo:hi])
    out_docs = np.insert(kept_docs, slots, docs.astype(np.int32))
    out_tf = np.insert(kept_tf, slots, tf.astype(kept_tf.dtype))
    counts = np.diff(kept_indptr) + np.bincount(terms, minlength=vocab)
    out_indptr = np.zeros(vocab + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    lengths = np.zeros(size, dtype=np.int32)
    kept = doc_map >= 0
    lengths[doc_map[kept]] = np.asarray(old.lengths)[kept]
    lengths[new_ids] = new_lengths
    return Postings(out_indptr, out_docs, out_tf, lengths)


def _renumbered(docs: np.ndarray, doc_map: np.ndarray) -> np.ndarray:
    """`doc_map[docs]`, a slice at a time: indexing with the whole int32 array at once first
    widens it to a temporary index array twice its size (100 MB for 12.6M entries), which
    took longer than the lookups."""
    out = np.empty(len(docs), dtype=doc_map.dtype)
    for start in range(0, len(docs), _SLICE):
        np.take(doc_map, docs[start : start + _SLICE], out=out[start : start + _SLICE])
    return out
