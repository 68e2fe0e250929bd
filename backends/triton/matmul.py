"""Matmul in Triton: unblocked (per-output loads, no staging) against tiled (`tl.dot` on BM×BK and BK×BN
blocks), and the bias+gelu epilogue fused into the tiled kernel or run as its own elementwise kernel.

`tiled` is one program per BM×BN output tile looping over K in BK steps: `tl.dot` stages its operand blocks in
shared memory and feeds the tensor cores, each staged element reused BN (resp. BM) times. float32 operands go
through `input_precision="ieee"` (true float32 products, not TF32), so every backend computes the same thing.
With `fused` the epilogue is applied to the float32 accumulator before the only store. `unblocked` gives each
program BLOCK outputs (flattened row-major) and, for every chunk of KC along K, loads for *each* output its own
KC elements of A's row and of B's column, multiplies elementwise and sums: 2·KC loads per output and chunk, no
operand shared between outputs through shared memory or registers (only the hardware caches can share them).
It is written for that traffic, not for speed. All offsets are 64-bit. The same source runs in the
interpreter (which needs dot dimensions of at least 16, hence the scenario's smallest tile) and compiles on
Triton 3.6 and 3.9.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.ops import gelu
from backends.triton.record import record_triton
from suite.core.registry import Launch, kernel
from suite.kit.launch import cdiv

UNBLOCKED_BLOCK, UNBLOCKED_KC = 64, 16
"""Outputs per program and K chunk of the unblocked kernel: 2·64·16 loaded values per step, 8 per thread."""
EPILOGUE_BLOCK = 1024


@triton.jit
def _tiled_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EPILOGUE: tl.constexpr
):
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ka[:, None] * N + rn[None, :], mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    if EPILOGUE:
        bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
        acc = gelu(acc + bias[None, :])
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _unblocked_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr, KC: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < M * N
    row, col = offs // N, offs % N
    rk = tl.arange(0, KC)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, K, KC):
        kk = k0 + rk
        mask = inside[:, None] & (kk[None, :] < K)
        a = tl.load(a_ptr + row[:, None] * K + kk[None, :], mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + kk[None, :].to(tl.int64) * N + col[:, None], mask=mask, other=0.0).to(tl.float32)
        acc += tl.sum(a * b, axis=1)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, total, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(bias_ptr + offs % N, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, gelu(v).to(y_ptr.dtype.element_ty), mask=mask)


def num_warps(bm: int, bn: int) -> int:
    """4 warps for tiles up to 64×64 outputs, 8 above (the accumulator is spread over the program's threads)."""
    return 4 if bm * bn <= 64 * 64 else 8


@kernel(scenario="matmul", backend="triton", variant=("unblocked", "tiled", "unfused", "fused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`unblocked` or `tiled` into out, then the epilogue as its own kernel (`unfused` is `tiled`); `fused` applies
    the epilogue to the tile before its only store. Every kernel is compiled now (a no-op in the interpreter)."""
    matmul, fuse = {"unfused": "tiled", "fused": "tiled"}.get(variant, variant), variant == "fused"
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    m, n = out.shape
    k = a.shape[1]
    epilogue = params["epilogue"] == "bias_gelu"
    separate = epilogue and not fuse
    mid = out.new_empty(out.shape) if separate else out
    steps: list[tuple[Any, tuple, tuple, dict]] = []
    if matmul == "unblocked":
        meta = {"BLOCK": UNBLOCKED_BLOCK, "KC": UNBLOCKED_KC, "num_warps": 4}
        steps.append((_unblocked_kernel, (cdiv(m * n, UNBLOCKED_BLOCK),), (a, b, mid, m, n, k), meta))
    else:
        bm, bn, bk = params["tile"]
        meta = {"BM": bm, "BN": bn, "BK": bk, "EPILOGUE": epilogue and fuse, "num_warps": num_warps(bm, bn)}
        steps.append((_tiled_kernel, (cdiv(m, bm), cdiv(n, bn)), (a, b, bias, mid, m, n, k), meta))
    if separate:
        meta = {"BLOCK": EPILOGUE_BLOCK, "num_warps": 4}
        steps.append((_bias_gelu_kernel, (cdiv(m * n, EPILOGUE_BLOCK),), (mid, bias, out, m * n, n), meta))
    for fn, grid, args, meta in steps:
        compiled = fn.warmup(*args, grid=grid, **meta)
        constexprs = {k: v for k, v in meta.items() if k != "num_warps"}
        record_triton(fn, args, constexprs, meta["num_warps"], compiled=compiled)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for fn, grid, args, meta in steps:
                fn[grid](*args, **meta)

    return Launch(launch, allocates={"mid": mid.nbytes} if separate else {})
