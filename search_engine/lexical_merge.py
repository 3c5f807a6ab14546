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

from search_engine.lexical import LexicalBuilder, LexicalIndex, Postings, file_entries


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
    old: Postings, doc_map: np.ndarray, docs: np.ndarray, terms: np.ndarray, tf: np.ndarray,
    new_ids: np.ndarray, new_lengths: np.ndarray, size: int, vocab: int,
) -> Postings:
    """`old`'s kept entries renumbered by `doc_map`, with the new (doc, term, tf) entries
    placed among them; `new_ids` are the new documents, `new_lengths` their token counts."""
    indptr = np.asarray(old.indptr, dtype=np.int64)
    old_docs = doc_map[np.asarray(old.docs)]
    keep = old_docs >= 0
    kept_terms = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))[keep]
    kept_docs = old_docs[keep].astype(np.int32)
    kept_tf = np.asarray(old.tf)[keep]
    width = max(size, 1)
    order = np.lexsort((docs, terms))
    new_keys = terms[order].astype(np.int64) * width + docs[order]
    # Where each new entry goes among the kept ones, then its slot in the merged array.
    slots = np.searchsorted(kept_terms * width + kept_docs, new_keys) + np.arange(len(new_keys))
    total = len(kept_docs) + len(new_keys)
    is_new = np.zeros(total, dtype=bool)
    is_new[slots] = True
    out_docs = np.empty(total, dtype=np.int32)
    out_docs[slots], out_docs[~is_new] = docs[order], kept_docs
    out_tf = np.empty(total, dtype=kept_tf.dtype)
    out_tf[slots], out_tf[~is_new] = tf[order], kept_tf
    counts = np.bincount(kept_terms, minlength=vocab) + np.bincount(terms, minlength=vocab)
    out_indptr = np.zeros(vocab + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    lengths = np.zeros(size, dtype=np.int32)
    kept = doc_map >= 0
    lengths[doc_map[kept]] = np.asarray(old.lengths)[kept]
    lengths[new_ids] = new_lengths
    return Postings(out_indptr, out_docs, out_tf, lengths)
