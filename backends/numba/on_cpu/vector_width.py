"""The float32 vector width the Numba CPU micro-kernels are built for: the widest register the host holds.

The attention and matmul micro-kernels keep their accumulators in explicit LLVM vectors (`attention_simd`,
`matmul_micro`), so their width is chosen here rather than by LLVM's vectoriser: 8 lanes fill a ymm register
(AVX2), 16 a zmm register (AVX-512), twice the multiply-adds per instruction. Any width compiles on any host
(LLVM splits a vector wider than the host's registers) and gives the same bits, since a width decides only how
many outputs are summed side by side, never the order of a sum; tests run every width wherever they run.
"""

from __future__ import annotations

from llvmlite import binding

from backends.numba.full_width import builds_for_host

WIDTHS = (8, 16)
"""The widths the micro-kernels are built for, in float32 lanes: AVX2's ymm and AVX-512's zmm."""


def host_lanes() -> int:
    """16 where Numba compiles for this host and it has AVX-512F, else 8 (also where NUMBA_CPU_NAME or
    NUMBA_CPU_FEATURES choose another target than `full_width`'s, whose registers the host's features do not describe)."""
    if not builds_for_host():
        return 8
    return 16 if binding.get_host_cpu_features().get("avx512f", False) else 8


HOST_LANES = host_lanes()


def check_width(lanes: int, what: str) -> int:
    """`lanes` if the micro-kernels are built for it, else a ValueError naming the widths they are."""
    if lanes not in WIDTHS:
        raise ValueError(f"{what} vectors have {' or '.join(map(str, WIDTHS))} lanes, not {lanes}")
    return lanes
