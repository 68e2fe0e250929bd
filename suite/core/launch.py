"""Launch geometry the GPU backends share: grid sizes, row chunks and threads per row.

CuPy, Numba and Triton kernels of one case must cut a row into the same chunks and give it the same threads,
or the resource report and the timings would compare different launches rather than different libraries; so
the arithmetic lives here once. Everything takes and returns positive Python ints, on the host, before a
launch (device code does its own indexing).
"""

from __future__ import annotations

MAX_ITEMS = 64
"""Row values one thread of a row kernel holds in registers (or a local array) by default: at 128 ptxas spills,
so a wider chunk gets more threads instead. CuPy's `max_items` option raises it, to show what that costs."""


def cdiv(n: int, d: int) -> int:
    """⌈n / d⌉: blocks (or programs) of `d` that cover `n` elements, in exact integer arithmetic."""
    return -(-n // d)


def next_power_of_two(n: int) -> int:
    """The smallest power of two ≥ n (1 for n ≤ 1)."""
    return 1 << max(0, n - 1).bit_length()


def chunk_columns(cols: int, tile: int) -> int:
    """Columns per chunk of a row kernel: the case's `tile`, or the smallest power of two holding a narrower row."""
    return min(tile, next_power_of_two(cols))


def row_threads(chunk: int, threads: int, max_items: int = MAX_ITEMS) -> int:
    """Threads of the block that owns a row: `threads` (the backend's `block` option), but no more than a quarter
    of a chunk's columns (at least a warp: each thread takes a few columns), and more where a chunk would need
    more than `max_items` each; never above 1024. The options were checked against the backend's schema."""
    return min(1024, max(min(threads, max(32, chunk // 4)), chunk // max_items))
