"""Reading the .npy arrays of an index generation, from any thread.

numpy parses a .npy header with `ast.literal_eval`, and CPython 3.11 (seen on 3.11.7) keeps
the AST constructor's recursion depth in state that threads share (python/cpython#106905):
two threads opening arrays at once, a search and the background freshness check, could fail
one of them with "SystemError: AST constructor recursion depth mismatch". Every index read
goes through `load_array`, which holds one lock while numpy reads the header; the data is
memory-mapped, so the lock is held for microseconds.

A mapped array is handed out as a plain `ndarray` over the mapping (`mapped`), not as numpy's
`memmap` subclass: every slice or gather of a `memmap` builds another `memmap` and runs its
`__array_finalize__`, dozens of times per hybrid query (about a tenth of a warm query's CPU
on one copy of sympy). The view keeps the mapping alive as long as it is referenced.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import numpy as np

_HEADER_LOCK = threading.Lock()


def load_array(path: Path, *, mmap: bool = True) -> np.ndarray:
    """The array in `path`, memory-mapped when `mmap` (read when it is empty: numpy cannot map
    a zero-length array). ValueError when its header claims more data than the file holds,
    checked before numpy allocates anything by the claim (a 100-byte file claiming 10^12 rows
    was a 4 TB allocation)."""
    array_: np.ndarray
    with _HEADER_LOCK:
        _check_header(path)
        try:
            array_ = mapped(np.load(path, mmap_mode="r")) if mmap else np.load(path)
        except ValueError:
            if not mmap:
                raise
            array_ = np.load(path)
    return array_


def mapped(array_: np.ndarray) -> np.ndarray:
    """`array_` (a `np.memmap`) as a plain read-only `ndarray` over the same mapping."""
    view: np.ndarray = array_.view(np.ndarray)
    return view


def _check_header(path: Path) -> None:
    with open(path, "rb") as f:
        read = np.lib.format.read_array_header_1_0
        if np.lib.format.read_magic(f) != (1, 0):
            read = np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
        claimed = math.prod(shape) * dtype.itemsize
        if claimed > os.fstat(f.fileno()).st_size - f.tell():
            raise ValueError(f"{path.name} claims {claimed:,} bytes of data, more than it holds")
