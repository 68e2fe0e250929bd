"""`arrays.line_segments` splits a row where its first cache line ends, so a kernel's vector loop stores whole
lines from there (add_rmsnorm's kernels ran 1.4-1.5x faster for it): the split must fall on a 64-byte boundary,
cover the row exactly once, and keep rows that end before a boundary whole."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from backends.numba.on_cpu.arrays import LINE, line_segments


@njit
def _segments(row):  # type: ignore[no-untyped-def]
    return line_segments(row)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
@pytest.mark.parametrize("length", [1, 5, 33, 781])
def test_the_second_segment_starts_on_a_line_and_the_two_cover_the_row(dtype, length) -> None:
    block = np.zeros(length + 64, dtype)
    for offset in range(LINE // block.itemsize + 1):  # every start within a line, and the next line's first
        row = block[offset : offset + length]
        (a, p), (q, n) = _segments(row)
        assert (a, q, n) == (0, p, length) and 0 <= p <= length
        head = (LINE - row.ctypes.data % LINE) % LINE // row.itemsize
        if p < length:  # the row reaches a boundary: the second segment starts exactly on it
            assert (row.ctypes.data + p * row.itemsize) % LINE == 0 and p == head
        else:  # the row ends before its first boundary (or is a single short run): one segment, all of it
            assert head >= length
