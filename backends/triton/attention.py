"""Attention in Triton: the flash-style fused kernel against scores, row softmax and P·V kernels.

A program is one (query tile of BLOCK_M rows, batch·head), in every kernel but the softmax (one program per
row). The fused program keeps its query tile, a running row maximum m and sum and the float32 output
accumulator on chip, and streams K and V in tiles of BLOCK_N keys (the online softmax: each tile rescales what
was accumulated by exp(m_old - m_new)). The unfused scores and P·V programs stream the same tiles, with S
and P (row-major, the case's dtype) in device memory between them. Under the causal mask a query tile stops
at its last row's key, and masked elements of S and P are neither stored nor read.

Products are `tl.dot` with float32 accumulation; for float32 inputs `input_precision="ieee"` keeps them
float32 (Triton's default, TF32, would round the inputs to 10 bits). head_dim is padded to a power of two
(BLOCK_D, at least 16, the smallest `tl.dot`) with masked loads. The same source runs in the interpreter.

The tiles are the case's; num_warps and num_stages of the tiled kernels follow from them, head_dim and the
dtype (`backends.triton.launch.attention_config`), the softmax's warps from its chunk (`row_warps`), unless
`num_warps` is set; the launcher's notes record each kernel's settings. On a GPU the compiled kernel's shared
memory is held against what a block may opt in to there: over it, the kernel is rebuilt a pipeline stage
fewer, and at one stage the case is refused with the bytes (`_fit`). Grid y holds batch·heads, so more of
them than CUDA's 65535 are refused before anything is built.

K and V have batch·kv_heads heads: the program of (batch b, query head h), bh = b·heads + h along grid y,
reads K/V head bh // group = b·kv_heads + h // group (group = heads/kv_heads, a runtime argument: Triton
specialises an int argument equal to 1, so multi-head attention's programs compile as before), in place.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import attention_config, row_warps, shared_memory_problem, smem_optin
from backends.triton.record import record_triton
from suite.core.registry import Launch, Launcher, kernel
from suite.core.targets import NotRunnable
from suite.kit.launch import cdiv, next_power_of_two, require_grids
from suite.kit.launch_shape import chosen_by


@triton.jit
def _tile_ptrs(base, rows, dims, HEAD_DIM: tl.constexpr):
    """Pointers to [rows, dims] of a (seq_len, HEAD_DIM) matrix; rows and dims are index vectors."""
    return base + rows.to(tl.int64)[:, None] * HEAD_DIM + dims[None, :]


@triton.jit
def _scores(
    q,
    K,
    n0,
    end,
    rows,
    dims,
    scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """The scaled score tile q·K[n0:n0+BLOCK_N]ᵀ/√d, -inf where masked; and its keys and visibility mask."""
    keys = n0 + tl.arange(0, BLOCK_N)
    kmask = keys < end
    kt = tl.load(
        K + keys.to(tl.int64)[None, :] * HEAD_DIM + dims[:, None],
        mask=kmask[None, :] & (dims < HEAD_DIM)[:, None],
        other=0.0,
    )
    s = tl.dot(q, kt, input_precision=PRECISION) * scale
    visible = kmask[None, :] & (rows[:, None] >= 0)
    if CAUSAL:
        visible = visible & (keys[None, :] <= rows[:, None])
    return tl.where(visible, s, float("-inf")), keys, visible


@triton.jit
def _key_end(q0, seq_len, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """Keys a query tile reads: all, or up to its last row under the causal mask."""
    if CAUSAL:
        return tl.minimum(seq_len, q0 + BLOCK_M)
    return seq_len


@triton.jit
def _flash_kernel(
    Q,
    K,
    V,
    Out,
    seq_len,
    group,
    scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    q0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    off, kv_off = bh * seq_len * HEAD_DIM, (bh // group) * seq_len * HEAD_DIM
    rows, dims = q0 + tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_D)
    io_mask = (rows < seq_len)[:, None] & (dims < HEAD_DIM)[None, :]
    q = tl.load(_tile_ptrs(Q + off, rows, dims, HEAD_DIM), mask=io_mask, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    den = tl.zeros([BLOCK_M], tl.float32)  # the softmax's running sum
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = _key_end(q0, seq_len, CAUSAL, BLOCK_M)
    for n0 in range(0, end, BLOCK_N):
        s, keys, _ = _scores(q, K + kv_off, n0, end, rows, dims, scale, HEAD_DIM, CAUSAL, BLOCK_N, PRECISION)
        m_new = tl.maximum(m, tl.max(s, 1))  # finite: every row sees key 0 in the first tile
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        den = den * alpha + tl.sum(p, 1)
        v = tl.load(
            _tile_ptrs(V + kv_off, keys, dims, HEAD_DIM),
            mask=(keys < end)[:, None] & (dims < HEAD_DIM)[None, :],
            other=0.0,
        )
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new
    out = acc / den[:, None]
    tl.store(_tile_ptrs(Out + off, rows, dims, HEAD_DIM), out.to(Out.dtype.element_ty), mask=io_mask)


@triton.jit
def _scores_kernel(
    Q,
    K,
    S,
    seq_len,
    group,
    scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    q0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    off, kv_off = bh * seq_len * HEAD_DIM, (bh // group) * seq_len * HEAD_DIM
    rows, dims = q0 + tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_D)
    in_rows = rows < seq_len
    q = tl.load(
        _tile_ptrs(Q + off, rows, dims, HEAD_DIM), mask=in_rows[:, None] & (dims < HEAD_DIM)[None, :], other=0.0
    )
    s_base = S + bh * seq_len * seq_len + rows.to(tl.int64)[:, None] * seq_len
    end = _key_end(q0, seq_len, CAUSAL, BLOCK_M)
    for n0 in range(0, end, BLOCK_N):
        s, keys, visible = _scores(q, K + kv_off, n0, end, rows, dims, scale, HEAD_DIM, CAUSAL, BLOCK_N, PRECISION)
        tl.store(s_base + keys[None, :], s.to(S.dtype.element_ty), mask=visible & in_rows[:, None])


@triton.jit
def _softmax_kernel(S, P, seq_len, CAUSAL: tl.constexpr, BLOCK: tl.constexpr):
    """One row of S: a lane-wise online max and sum over chunks of BLOCK, combined; then P = exp(S - max)/sum."""
    row = tl.program_id(0).to(tl.int64)
    n = seq_len
    if CAUSAL:
        n = (row % seq_len + 1).to(tl.int32)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    den = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, n, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(S + row * seq_len + cols, mask=cols < n, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        pivot = tl.where(m_new == float("-inf"), 0.0, m_new)  # a lane with nothing yet: no -inf - -inf
        den = den * tl.exp(m - pivot) + tl.exp(x - pivot)
        m = m_new
    top = tl.max(m, 0)
    total = tl.sum(den * tl.exp(m - top), 0)
    for c0 in range(0, n, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(S + row * seq_len + cols, mask=cols < n, other=float("-inf")).to(tl.float32)
        tl.store(P + row * seq_len + cols, (tl.exp(x - top) / total).to(P.dtype.element_ty), mask=cols < n)


@triton.jit
def _pv_kernel(
    P,
    V,
    Out,
    seq_len,
    group,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    q0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    off, kv_off = bh * seq_len * HEAD_DIM, (bh // group) * seq_len * HEAD_DIM
    rows, dims = q0 + tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_D)
    io_mask = (rows < seq_len)[:, None] & (dims < HEAD_DIM)[None, :]
    p_base = P + bh * seq_len * seq_len + rows.to(tl.int64)[:, None] * seq_len
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = _key_end(q0, seq_len, CAUSAL, BLOCK_M)
    for n0 in range(0, end, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        visible = (keys < end)[None, :] & (rows < seq_len)[:, None]
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        p = tl.load(p_base + keys[None, :], mask=visible, other=0.0)
        v = tl.load(
            _tile_ptrs(V + kv_off, keys, dims, HEAD_DIM),
            mask=(keys < end)[:, None] & (dims < HEAD_DIM)[None, :],
            other=0.0,
        )
        acc += tl.dot(p, v, input_precision=PRECISION)
    tl.store(_tile_ptrs(Out + off, rows, dims, HEAD_DIM), acc.to(Out.dtype.element_ty), mask=io_mask)


SOFTMAX_BLOCK = 1024
"""Chunk of a row the softmax kernel holds at once (smaller for short rows)."""
NUM_WARPS = {"float32": 8, "float16": 4, "bfloat16": 4}
"""What `attention_config` gives the presets' 64×64 tiles of head_dim 64: float32 products run on FMA units (no
tensor cores in "ieee" precision) and need the registers of 8 warps; float16 and bfloat16 use mma with 4."""


def tile_constants(params: dict) -> dict[str, Any]:
    """The constexprs of the tiled kernels for a case."""
    return {
        "HEAD_DIM": int(params["head_dim"]),
        "CAUSAL": bool(params["causal"]),
        "BLOCK_M": int(params["block_m"]),
        "BLOCK_N": int(params["block_n"]),
        "BLOCK_D": max(16, next_power_of_two(int(params["head_dim"]))),
        "PRECISION": "ieee",
    }


def softmax_block(seq_len: int) -> int:
    return min(SOFTMAX_BLOCK, max(16, next_power_of_two(seq_len)))


Step = tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any], dict[str, int]]
"""(kernel, grid, arguments, constexprs, launch options: num_warps and num_stages where chosen)."""


def tiled_options(consts: dict[str, Any], dtype: str, opts: dict) -> dict[str, int]:
    """num_warps and num_stages of the tiled kernels (flash, scores, P·V) of a case."""
    return attention_config(consts["BLOCK_M"], consts["BLOCK_N"], consts["BLOCK_D"], dtype, opts)


def _fit(
    fn: Any, grid: tuple[int, ...], args: tuple, consts: dict[str, Any], launch_opts: dict[str, int]
) -> tuple[Any, dict[str, int]]:
    """Compile a step (a no-op in the interpreter); the compiled kernel and the launch options that fit this GPU.

    A kernel over the shared memory a block may opt in to is compiled again a pipeline stage fewer (one stage
    of K and V buffers less) while it has more than one: float32 at head_dim 64 with 256×128 tiles needs
    263,168 bytes at the rule's two stages, 230,400 at one, and sm_90 allows 232,448 (the rule counts only the
    K and V buffers; the compiled size is the truth). At one stage the kernel is refused now, with the bytes,
    not by Triton's OutOfResources at its first launch; as NotRunnable (a skipped row), where CuPy and Numba
    raise ValueError over their fixed 48 KB: theirs is a limit of the code, this one of the device."""
    limit = smem_optin()
    while True:
        compiled = fn.warmup(*args, **consts, **launch_opts, grid=grid)
        shared = getattr(getattr(compiled, "metadata", None), "shared", None)
        stages = launch_opts.get("num_stages", 1)
        why = None if shared is None else shared_memory_problem(int(shared), limit, stages)
        if why is None:
            return compiled, launch_opts
        if stages <= 1:
            raise NotRunnable(f"triton attention: {fn.fn.__name__.strip('_')} {why}")
        launch_opts = {**launch_opts, "num_stages": stages - 1}


def _launcher(steps: list[Step], opts: dict) -> Launcher:
    """Compile every step now (a no-op in the interpreter), each at launch options that fit the device
    (`_fit`), and return a closure that only launches."""
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    fitted: list[Step] = []
    for fn, grid, args, consts, wanted in steps:
        compiled, launch_opts = _fit(fn, grid, args, consts, wanted)
        extra = {k: v for k, v in launch_opts.items() if k != "num_warps"}
        record_triton(fn, args, consts, launch_opts["num_warps"], compiled=compiled, **extra)
        fitted.append((fn, grid, args, consts, launch_opts))

    def launch() -> None:
        with context():
            for fn, grid, args, consts, launch_opts in fitted:
                fn[grid](*args, **consts, **launch_opts)

    kernels = {fn.fn.__name__.strip("_"): {**launch_opts, "grid": list(grid)} for fn, grid, _, _, launch_opts in fitted}
    return Launch(launch, notes={"launch": {**kernels, "chosen_by": chosen_by(opts, ("num_warps",))}})


TILED_GRID = ("query tiles", "batch·heads")
"""What the dimensions of the tiled kernels' grid count (`grid_problem` names them in a refusal)."""
TOO_MANY_HEADS = "lower batch or heads: every (batch, head) is a row of blocks along grid y"


def _dtype(out: Any) -> str:
    return str(out.dtype).removeprefix("torch.")


def _shape(params: dict) -> tuple[int, int, float]:
    heads = int(params["batch"]) * int(params["heads"])
    return heads, int(params["seq_len"]), 1.0 / math.sqrt(int(params["head_dim"]))


def _group(inputs: dict[str, Any]) -> int:
    """Query heads per K/V head, from the arrays themselves (dimension 1 of q and of k)."""
    return int(inputs["q"].shape[1]) // int(inputs["k"].shape[1])


@kernel(scenario="attention", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    heads, seq_len, scale = _shape(params)
    consts = tile_constants(params)
    grid = (cdiv(seq_len, consts["BLOCK_M"]), heads)
    require_grids("triton attention", [(grid, TILED_GRID)], TOO_MANY_HEADS)
    args = (inputs["q"], inputs["k"], inputs["v"], out, seq_len, _group(inputs), scale)
    return _launcher([(_flash_kernel, grid, args, consts, tiled_options(consts, _dtype(out), opts))], opts)


@kernel(scenario="attention", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    heads, seq_len, scale = _shape(params)
    consts = tile_constants(params)
    tiled, rows = (cdiv(seq_len, consts["BLOCK_M"]), heads), (heads * seq_len,)
    require_grids("triton attention", [(tiled, TILED_GRID), (rows, ("batch·heads·seq_len rows",))], TOO_MANY_HEADS)
    s, p = out.new_empty((heads, seq_len, seq_len)), out.new_empty((heads, seq_len, seq_len))
    tiled_opts = tiled_options(consts, _dtype(out), opts)
    block, group = softmax_block(seq_len), _group(inputs)
    row_consts, row_opts = {"CAUSAL": consts["CAUSAL"], "BLOCK": block}, {"num_warps": row_warps(block, opts)}
    steps: list[Step] = [
        (_scores_kernel, tiled, (inputs["q"], inputs["k"], s, seq_len, group, scale), consts, tiled_opts),
        (_softmax_kernel, rows, (s, p, seq_len), row_consts, row_opts),
        (_pv_kernel, tiled, (p, inputs["v"], out, seq_len, group), consts, tiled_opts),
    ]
    return _launcher(steps, opts)
