"""Matmul on the host CPU with Numba: unblocked (the naive triple loop) against tiled, and the bias+gelu epilogue.

`unblocked` computes each output from a row of A and a column of B read from memory, with nothing staged:
the column is strided, so every product misses reuse by design. `tiled` is a GotoBLAS/BLIS-style kernel.
Each launch first packs A into MR-row panels and B into NR-column panels (contiguous float32, float16 bits
converted once per element there, not once per product); then one parallel task per MC×NC block of C (the
tile's BM×BN, BM rounded up to whole panels) walks K in slices of KC = BK and, for each NR panel of B's KC×NC
slice, lets every MR panel of A's MC×KC slice update its MR×NR micro-tile in registers
(`backends.numba.on_cpu.matmul_micro`). The task's block lives in a float32 accumulator until its only store,
where `fused` applies bias+gelu; `unfused` (and `unblocked`/`tiled` with the epilogue) writes A·B to memory
in the storage dtype and runs a separate elementwise kernel. Edge panels are zero-padded: their extra rows
and columns are computed into accumulator slots that are never stored; K is never padded. The K sum runs in
order in every kernel, one multiply-add per product, so all variants round alike; see FASTMATH.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba import BACKEND
from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.matmul_micro import micro
from backends.numba.on_cpu.vector_width import HOST_LANES
from backends.numba.op_tables import op_table
from backends.numba.ops import CODECS, VECTOR_CODECS
from suite.core.registry import Launch, Launcher, kernel

FASTMATH = {"contract"}
"""Only contraction: LLVM may fuse a multiply and the add that consumes it into one FMA (one rounding, not
two). The K sum keeps its order and nothing is reassociated. Every kernel here takes it, and the tiled
micro-kernel's `llvm.fmuladd` is the same permission, so unblocked and tiled still round identically step by
step (tests/test_matmul.py asserts bit equality) and fused and unfused differ only in where A·B is stored."""


@register_jitable
def _plain(v: float, bias: float) -> float:
    return v


@functools.cache
def _finish(epilogue: bool, math: str) -> Callable[[float, float], float]:
    """What is applied to an accumulator before its store: nothing, or gelu(v + bias) with the gelu of math mode
    `math` (`backend_options.numba.math`; the fast one vectorises, libm's tanh is a call per element)."""
    if not epilogue:
        return _plain
    gelu = op_table(math)["gelu"]

    @register_jitable
    def bias_gelu(v: float, bias: float) -> float:
        return gelu(v + bias)

    return bias_gelu


@functools.cache
def _unblocked_kernel(dtype: str) -> Any:
    load, store = VECTOR_CODECS[dtype]

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def unblocked(a, b, c):  # type: ignore[no-untyped-def]
        m, k = a.shape
        n = b.shape[1]
        for i in prange(m):
            for j in range(n):
                acc = np.float32(0.0)
                for kk in range(k):
                    acc += load(a[i, kk]) * load(b[kk, j])
                c[i, j] = store(acc)

    return unblocked


PACK_ROWS, PACK_PANELS = 64, 16
"""Rows and NR-panels of B per packing task."""


@register_jitable
def _panels(size: int, width: int) -> int:
    """Panels (or tiles) of `width` that cover `size`, the last one partial."""
    return (size + width - 1) // width


@functools.cache
def _pack_kernels(dtype: str, lanes: int) -> tuple[Any, Any]:
    """Packing A into MR-row panels and B into NR-column panels (two vectors of `lanes`), converting to float32
    once per element."""
    load = VECTOR_CODECS[dtype][0]
    MR, NR = micro(lanes).mr, micro(lanes).nr

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def pack_a(a, ap):  # type: ignore[no-untyped-def]
        """ap[(q·K + p)·MR + i] = A[q·MR + i, p]: panel q holds MR rows, one K step per MR values, written in
        order while MR rows of A are read side by side."""
        m, k = a.shape
        for q in prange(_panels(m, MR)):
            base, r0 = q * k * MR, q * MR
            if r0 + MR <= m:
                for p in range(k):
                    for i in range(MR):
                        ap[base + p * MR + i] = load(a[r0 + i, p])
            else:  # the edge panel: zero rows past the edge, computed into accumulator rows never stored
                for p in range(k):
                    for i in range(MR):
                        ap[base + p * MR + i] = load(a[r0 + i, p]) if r0 + i < m else 0.0

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def pack_b(b, bp):  # type: ignore[no-untyped-def]
        """bp[(q·K + p)·NR + j] = B[p, q·NR + j]: panel q holds NR columns, one K step per NR values. B is
        read in blocks of PACK_ROWS rows × PACK_PANELS panels, a whole KB of each row at a time: one panel's
        64 bytes per row would touch a new page of B on every row."""
        k, n = b.shape
        panels = _panels(n, NR)
        groups = _panels(panels, PACK_PANELS)
        for t in prange(_panels(k, PACK_ROWS) * groups):
            p0, g0 = (t // groups) * PACK_ROWS, (t % groups) * PACK_PANELS
            for p in range(p0, min(p0 + PACK_ROWS, k)):
                row = b[p]
                for q in range(g0, min(g0 + PACK_PANELS, panels)):
                    base, j0 = (q * k + p) * NR, q * NR
                    # slices index from 0: an index LLVM cannot prove positive turns the loads into gathers
                    src, dst = row[j0 : j0 + NR], bp[base : base + NR]
                    if src.size == NR:
                        for j in range(NR):
                            dst[j] = load(src[j])
                    else:  # the edge panel: zeros past the last column
                        for j in range(NR):
                            dst[j] = load(src[j]) if j < src.size else 0.0

    return pack_a, pack_b


@functools.cache
def _tiled_kernel(bm: int, bn: int, bk: int, dtype: str, epilogue: bool, math: str, lanes: int) -> Any:
    """One kernel per (tile, dtype, epilogue, math mode, vector width): the tile sizes are compile-time constants
    of the loops.

    A task owns an MC×NC block of C (MC = BM rounded up to whole MR panels, NC = BN rounded up to whole NR
    panels), holds it in a float32
    accumulator, and walks K in slices of KC = BK: for each NR panel of B (KC×NR, which stays in L1), every MR
    panel of A's MC×KC block (in L2) updates its micro-tile in registers.
    """
    store = VECTOR_CODECS[dtype][1]
    load = VECTOR_CODECS[dtype][0]
    finish = _finish(epilogue, math)
    mk = micro(lanes)
    micro_tile, MR, NR = mk.tile, mk.mr, mk.nr
    pm, pn = _panels(bm, MR), _panels(bn, NR)  # panels per task
    ldc = pn * NR

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def tiled(ap, bp, k, bias, c):  # type: ignore[no-untyped-def]
        m, n = c.shape
        panels_m, panels_n = _panels(m, MR), _panels(n, NR)
        tiles_m, tiles_n = _panels(panels_m, pm), _panels(panels_n, pn)
        for t in prange(tiles_m * tiles_n):
            q_m, q_n = (t // tiles_n) * pm, (t % tiles_n) * pn
            np_m, np_n = min(pm, panels_m - q_m), min(pn, panels_n - q_n)
            acc = np.zeros(pm * MR * ldc, dtype=np.float32)
            for k0 in range(0, k, bk):
                kc = min(bk, k - k0)
                for jr in range(np_n):
                    b_off = ((q_n + jr) * k + k0) * NR
                    for ir in range(np_m):
                        micro_tile(ap, ((q_m + ir) * k + k0) * MR, bp, b_off, kc, acc, ir * MR * ldc + jr * NR, ldc)
            i0, j0 = q_m * MR, q_n * NR
            rows, cols = min(pm * MR, m - i0), min(ldc, n - j0)
            bias_block = bias[j0 : j0 + cols]  # slices index from 0: `c[i0 + i, j0 + j]` may be negative to LLVM,
            for i in range(rows):  # whose wraparound then turns the loop's loads into gathers, its stores into scatters
                c_row, acc_row = c[i0 + i, j0 : j0 + cols], acc[i * ldc : i * ldc + cols]
                for j in range(cols):
                    c_row[j] = store(finish(acc_row[j], load(bias_block[j])))

    return tiled


def _tiled_launch(
    params: dict,
    dtype: str,
    epilogue: bool,
    math: str,
    a: np.ndarray,
    b: np.ndarray,
    bias: np.ndarray,
    c: np.ndarray,
    lanes: int = HOST_LANES,
) -> Callable[[], None]:
    """Pack A and B (buffers allocated here, once), then run the tiled kernel into c, on vectors of `lanes`
    (the host's widest unless a test asks for another)."""
    (m, k), n = a.shape, b.shape[1]
    mr, nr = micro(lanes).mr, micro(lanes).nr
    ap = np.empty(_panels(m, mr) * mr * k, np.float32)
    bp = np.empty(_panels(n, nr) * nr * k, np.float32)
    packs = _pack_kernels(dtype, lanes)
    pack_a, pack_b = (_compiled(f, x, y) for f, x, y in zip(packs, (a, b), (ap, bp), strict=True))
    mm = _compiled(_tiled_kernel(*params["tile"], dtype, epilogue, math, lanes), ap, bp, k, bias, c)

    def launch() -> None:
        pack_a(a, ap)
        pack_b(b, bp)
        mm(ap, bp, k, bias, c)

    return launch


@functools.cache
def _epilogue_kernel(dtype: str, math: str) -> Any:
    """out = gelu(x + bias) elementwise, x the stored A·B: the epilogue as its own kernel, with the same gelu as
    the fused kernel's."""
    load, store = VECTOR_CODECS[dtype]
    bias_gelu_of = _finish(True, math)

    @njit(parallel=True, fastmath=FASTMATH, cache=False)
    def bias_gelu(x, bias, out):  # type: ignore[no-untyped-def]
        m, n = x.shape
        for i in prange(m):
            for j in range(n):
                out[i, j] = store(bias_gelu_of(load(x[i, j]), load(bias[j])))

    return bias_gelu


def _compiled(dispatcher: Any, *arrays: np.ndarray) -> Any:
    dispatcher.compile(tuple(numba.typeof(x) for x in arrays))
    return dispatcher


def _dtype(inputs: dict[str, Any], out: np.ndarray) -> str:
    dtype = str(out.dtype)
    if dtype not in CODECS or any(inputs[x].dtype != out.dtype for x in ("a", "b", "bias")):
        found = ", ".join(f"{x} {inputs[x].dtype}" for x in ("a", "b", "bias"))
        raise ValueError(f"numba/cpu matmul: {found} -> out {dtype}; needs one of {list(CODECS)} throughout")
    return dtype


def _steps(matmul: str, inputs: dict[str, Any], out: np.ndarray, params: dict, math: str) -> Launcher:
    """The matmul kernel `matmul` ("unblocked" or "tiled"), then the epilogue as a separate kernel if any.

    Nothing is fused here: with an epilogue, A·B goes to a scratch array in the storage dtype and back.
    """
    dtype = _dtype(inputs, out)
    a, b, bias, c = (storage(x) for x in (inputs["a"], inputs["b"], inputs["bias"], out))
    epilogue = params["epilogue"] == "bias_gelu"
    mid = np.empty_like(c) if epilogue else c
    if matmul == "unblocked":
        mm, mm_args = _compiled(_unblocked_kernel(dtype), a, b, mid), (a, b, mid)
    else:
        mm, mm_args = _tiled_launch(params, dtype, False, math, a, b, bias, mid), ()
    lanes = {} if matmul == "unblocked" else {"lanes": HOST_LANES}
    epi = _compiled(_epilogue_kernel(dtype, math), mid, bias, c) if epilogue else None

    def launch() -> None:
        mm(*mm_args)
        if epi is not None:
            epi(mid, bias, c)

    return Launch(launch, notes={"math": math, **lanes})


@kernel(scenario="matmul", backend="numba", variant="unblocked", device="cpu")
def unblocked(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The naive triple loop: A's row and B's strided column from memory for every output."""
    return _steps("unblocked", inputs, out, params, BACKEND.option(opts, "math"))


@kernel(scenario="matmul", backend="numba", variant=("tiled", "unfused"), device="cpu")
def tiled(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The tiled kernel; with the epilogue, followed by the separate bias+gelu kernel."""
    return _steps("tiled", inputs, out, params, BACKEND.option(opts, "math"))


@kernel(scenario="matmul", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """The tiled kernel with the epilogue (if any) applied to the accumulator tile before its only store."""
    dtype = _dtype(inputs, out)
    a, b, bias, c = (storage(x) for x in (inputs["a"], inputs["b"], inputs["bias"], out))
    math = BACKEND.option(opts, "math")
    launch = _tiled_launch(params, dtype, params["epilogue"] == "bias_gelu", math, a, b, bias, c)
    return Launch(launch, notes={"math": math, "lanes": HOST_LANES})
