"""Launch geometry the GPU backends share: grid sizes, row chunks and threads per row.

CuPy, Numba and Triton kernels of one case must cut a row into the same chunks and give it the same threads,
or the resource report and the timings would compare different launches rather than different libraries; so
the arithmetic lives here once. Everything takes and returns positive Python ints, on the host, before a
launch (device code does its own indexing). So do CUDA's grid limits (`grid_problem`): a launch they refuse
becomes a skipped row with the reason, before any work, rather than an error the device reports later.
"""

from __future__ import annotations

from collections.abc import Sequence

from suite.core.targets import NotRunnable

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


ROW_ITEMS = 8
"""Columns per thread a row block is sized for when no `block` option sets its threads: the Triton row kernels'
warps per tile (a warp per 256 columns, `backends.triton.launch.row_warps`) counted in CUDA threads."""


def row_threads(chunk: int, threads: int | None, max_items: int = MAX_ITEMS) -> int:
    """Threads of the block that owns a row. `threads` is the backend's `block` option: None chooses from the
    shape, ROW_ITEMS columns of the chunk per thread. Either way no more than a quarter of a chunk's columns (at
    least a warp: each thread takes a few columns), and more where a chunk would need more than `max_items`
    each; never above 1024. The options were checked against the backend's schema."""
    if threads is None:
        threads = max(32, chunk // ROW_ITEMS)
    return min(1024, max(min(threads, max(32, chunk // 4)), chunk // max_items))


GRID_LIMITS = (2**31 - 1, 65535, 65535)
"""The most blocks CUDA launches along grid x, y and z (every architecture since sm_30)."""


def grid_problem(grid: Sequence[int], meaning: Sequence[str] = ()) -> str | None:
    """Why CUDA would refuse to launch `grid` (blocks along x, y, z), or None where it launches: the first
    dimension out of range, its value and the limit, with what that dimension counts where `meaning` names it
    ("grid y = batch·heads = 70000 exceeds CUDA's 65535"). A refused launch fails only on the device, with an
    "invalid argument" that names nothing, so launchers ask this before they allocate or compile anything."""
    if not 1 <= len(grid) <= len(GRID_LIMITS):
        return f"a grid has 1 to {len(GRID_LIMITS)} dimensions, not {len(grid)}"
    for i, (size, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
        what = f"grid {'xyz'[i]} = " + (f"{meaning[i]} = " if i < len(meaning) else "") + f"{size}"
        if size < 1:
            return f"{what}: CUDA launches no empty grid"
        if size > limit:
            return f"{what} exceeds CUDA's {limit}"
    return None


def require_grids(who: str, grids: Sequence[tuple[Sequence[int], Sequence[str]]], advice: str) -> None:
    """Raise NotRunnable("{who}: {problem}; {advice}") for the first of `grids` ((grid, meaning) pairs) that
    CUDA would refuse: the case is valid, this launch geometry cannot carry it on any CUDA device."""
    for grid, meaning in grids:
        if problem := grid_problem(grid, meaning):
            raise NotRunnable(f"{who}: {problem}; {advice}")
