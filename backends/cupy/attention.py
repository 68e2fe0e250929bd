"""Attention in CuPy: generated CUDA C (RawKernels, so NVRTC checks them without a GPU), fused and unfused.

The tiling is the Numba CUDA one (backends/numba/on_cuda/attention.py): a block per (query tile of BM rows,
batch·head) with 2·BM threads in a (BM/4) × 8 grid; each thread computes a 4 × BN/8 patch of the score tile
in registers and owns the float32 output accumulator of its 4 rows at dims tx + 8·e. Q, K and V reach shared
memory in chunks of 32 dims (Numba stages V by whole rows instead: it does not unroll the chunk loop, which
would put the accumulator in local memory), so the static shared memory is the same at any head_dim:
(BM + BN)·33 + BM·(BN + 1) + 7·BM floats, 35 KB at 64 × 64. Scores and probabilities sit in the shared tile
`ss` between phases; two threads per row reduce its max and sum there.

Fused, the block keeps the running max and sum (`stats`) and the accumulator across key tiles and rescales
them by exp(m_old - m_new): the online softmax. Unfused, `attn_scores` stores the score tile to S,
`attn_softmax` (8 threads per row, 16 rows per block) writes P, and `attn_pv` loads P tiles back into the
shared tile: the same tile code on both sides of the device-memory boundary. Masked elements of S and P are
neither stored nor read. float16 is stored as raw 16-bit words, converted with cvt.f32.f16 / cvt.rn.f16.f32.
K and V have batch·kv_heads heads; each block reads its query head's K/V head in place (grouped-query attention,
the group compiled in: `attention_kernels.GROUP`).

The kernels' text is `backends.cupy.attention_kernels`; this module compiles and launches it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.attention_kernels import NAMES, ROW_THREADS, ROWS, shared_bytes, source
from backends.cupy.build import build
from backends.cupy.device import CTYPES
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import cdiv, require_grids

SHARED_LIMIT = 48 * 1024
"""Static shared memory per block without an opt-in."""
TILED_GRID = ("query tiles", "batch·heads")
"""What the dimensions of the tiled kernels' grid count (`grid_problem` names them in a refusal)."""
TOO_MANY_HEADS = "lower batch or heads: every (batch, head) is a row of blocks along grid y"


def _kv(params: dict, inputs: dict[str, Any]) -> dict:
    """The case with kv_heads read off k itself, since the group is compiled into the kernels."""
    return {**params, "kv_heads": int(inputs["k"].shape[1])}


def _compiled(params: dict, dtype: str, names: tuple[str, ...]) -> list[Any]:
    if shared_bytes(int(params["block_m"]), int(params["block_n"])) > SHARED_LIMIT:
        raise ValueError(
            f"cupy attention: tiles {params['block_m']}×{params['block_n']} need "
            f"{shared_bytes(int(params['block_m']), int(params['block_n']))} bytes of shared memory, over the "
            f"{SHARED_LIMIT} a block gets without an opt-in; use smaller block_m or block_n"
        )
    text = source(params, dtype)
    threads = {"attn_softmax": ROWS * ROW_THREADS}  # the tiled kernels run 2·BM threads a block
    return [build(text, name, threads=threads.get(name, 2 * int(params["block_m"]))) for name in names]


def _launcher(launches: list[tuple[Any, tuple, tuple, tuple]], opts: dict) -> Launcher:
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, grid, block, args in launches:
                k(grid, block, args)

    # the tiles are the case's and each kernel's threads follow from them (2·BM; the softmax ROWS·ROW_THREADS)
    kernels = {
        getattr(k, "name", f"kernel{i}"): {"grid": list(grid), "block": list(block)}
        for i, (k, grid, block, _) in enumerate(launches)
    }
    return Launch(launch, notes={"launch": {**kernels, "chosen_by": "tile"}})


def _dtype(inputs: dict[str, Any], out: Any) -> str:
    dtype = np.dtype(out.dtype).name
    if dtype not in CTYPES or any(np.dtype(inputs[n].dtype) != np.dtype(out.dtype) for n in ("q", "k", "v")):
        raise ValueError(f"cupy attention: q, k, v and out must share one dtype of {list(CTYPES)}")
    return dtype


def _tiled(params: dict) -> tuple[tuple[int, int], tuple[int], np.int32, np.float32]:
    grid = (cdiv(params["seq_len"], params["block_m"]), params["batch"] * params["heads"])
    return (
        grid,
        (2 * int(params["block_m"]),),
        np.int32(params["seq_len"]),
        np.float32(1 / math.sqrt(params["head_dim"])),
    )


def _softmax_grid(params: dict) -> tuple[tuple[int], int]:
    """The unfused softmax's grid (blocks of ROWS rows of S) and its rows, batch·heads·seq_len."""
    rows = params["batch"] * params["heads"] * params["seq_len"]
    return (cdiv(rows, ROWS),), rows


@kernel(scenario="attention", backend="cupy", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    grid, block, seq_len, scale = _tiled(params)
    require_grids("cupy attention", [(grid, TILED_GRID)], TOO_MANY_HEADS)
    (flash,) = _compiled(_kv(params, inputs), _dtype(inputs, out), NAMES["fused"])
    return _launcher([(flash, grid, block, (inputs["q"], inputs["k"], inputs["v"], out, seq_len, scale))], opts)


@kernel(scenario="attention", backend="cupy", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    (grid, block, seq_len, scale), (row_grid, rows) = _tiled(params), _softmax_grid(params)
    require_grids("cupy attention", [(grid, TILED_GRID), (row_grid, (f"blocks of {ROWS} rows",))], TOO_MANY_HEADS)
    dtype = _dtype(inputs, out)
    scores, softmax, pv = _compiled(_kv(params, inputs), dtype, NAMES["unfused"])
    shape = (params["batch"], params["heads"], params["seq_len"], params["seq_len"])
    s, p = TARGET.empty(shape, dtype), TARGET.empty(shape, dtype)
    launches = [
        (scores, grid, block, (inputs["q"], inputs["k"], s, seq_len, scale)),
        (softmax, row_grid, (ROWS * ROW_THREADS,), (s, p, np.int64(rows), seq_len)),
        (pv, grid, block, (p, inputs["v"], out, seq_len)),
    ]
    return _launcher(launches, opts)
