"""Attention on CUDA with Numba: a flash-style fused kernel against scores, row-softmax and P·V kernels.

A block is one (query tile of block_m rows, batch·head) in every kernel but the softmax (16 rows a block,
8 threads a row). Its 2·block_m threads form a (block_m/4) × 8 grid: thread (ty, tx) computes the scores of
rows ty + R·a (a < 4, R = block_m/4) and keys tx + 8·b, and owns the float32 output accumulator of those
rows at dims tx + 8·e. Q and K reach shared memory 32 dims at a time, V a few whole rows at a time (so that
every index into the accumulator is a compile-time constant and it stays in registers), all through buffers
whose size does not depend on head_dim: (block_m + block_n)·33 + block_m·(block_n + 1) + 7·block_m floats,
35 KB at 64 × 64, under the 48 KB of static shared memory a Numba kernel can have. Scores and probabilities
sit in the shared tile `ss` between phases; two threads per row reduce its max and sum there.

Fused, the block keeps the running max m, sum l and accumulator across key tiles and rescales them by
exp(m_old - m_new) (the online softmax). Unfused, the scores kernel stores the tile to S, the softmax kernel
writes P, and the P·V kernel loads P tiles into the same shared tile: the same code on both sides of the
device-memory boundary. Masked elements of S and P are neither stored nor read. Both run in the simulator.

K and V have kv_heads heads: the block of query head h reads K/V head h // (heads/kv_heads) of its batch, in
place (grouped-query attention, none copied).

The kernels are `attention_kernels` (built on the device functions of `attention_tiles`); this module
compiles, records and launches them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import simulating, stream_arg
from backends.numba.on_cuda.attention_kernels import ROW_THREADS, ROWS, kernel_sources_for
from backends.numba.on_cuda.attention_tiles import config
from backends.numba.record import record_numba
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import cdiv, require_grids

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

DTYPES = ("float32", "float16")
SHARED_LIMIT = 48 * 1024
"""Static shared memory a Numba kernel may use (more needs an opt-in Numba cannot make)."""
TILED_GRID = ("query tiles", "batch·heads")
"""What the dimensions of the tiled kernels' grid count (`grid_problem` names them in a refusal)."""
TOO_MANY_HEADS = "lower batch or heads: every (batch, head) is a row of blocks along grid y"


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    fns = kernel_sources_for(
        int(params["block_m"]), int(params["block_n"]), int(params["head_dim"]), bool(params["causal"])
    )
    a = f"{dtype}[:, :, :, ::1]"
    sigs = {
        "flash": f"void({a}, {a}, {a}, {a}, float32)",
        "scores": f"void({a}, {a}, {a}, float32)",
        "softmax": f"void({a}, {a})",
        "pv": f"void({a}, {a}, {a})",
    }
    names = ["flash"] if variant == "fused" else ["scores", "softmax", "pv"]
    return {name: (fns[name], sigs[name]) for name in names}


@functools.cache
def _dispatcher(name: str, block_m: int, block_n: int, head_dim: int, causal: bool) -> Any:
    return cuda.jit(kernel_sources_for(block_m, block_n, head_dim, causal)[name])


def _launcher(steps: list[tuple[str, tuple, int, tuple]], params: dict, opts: dict) -> Launcher:
    """Compile (on a GPU) and configure every step: (kernel name, grid, threads, args); launching is all left."""
    key = (int(params["block_m"]), int(params["block_n"]), int(params["head_dim"]), bool(params["causal"]))
    c = config(*key[:3])
    if c.shared_bytes > SHARED_LIMIT:
        raise ValueError(
            f"numba/cuda attention: tiles {key[0]}×{key[1]} need {c.shared_bytes} bytes of shared memory, over "
            f"the {SHARED_LIMIT} a Numba kernel may use; use smaller block_m or block_n"
        )
    stream, prepared = stream_arg(opts.get("stream")), []
    for name, grid, threads, args in steps:
        dispatcher = _dispatcher(name, *key)
        compiled = None
        if not simulating():
            compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
        record_numba((__name__, "_dispatcher", (name, *key)), args, threads, name=name, compiled=compiled)
        prepared.append((dispatcher, grid, threads, args))

    def launch() -> None:
        for dispatcher, grid, threads, args in prepared:
            dispatcher[grid, threads, stream](*args)

    # the tiles are the case's and each kernel's threads follow from them (2·BM; the softmax ROWS·ROW_THREADS)
    kernels = {name: {"grid": list(grid), "block": threads} for name, grid, threads, _ in steps}
    return Launch(launch, notes={"launch": {**kernels, "chosen_by": "tile"}})


def _check(inputs: dict[str, Any], out: Any) -> None:
    if str(out.dtype) not in DTYPES or any(inputs[n].dtype != out.dtype for n in ("q", "k", "v")):
        raise ValueError(f"numba/cuda attention: q, k, v and out must share one dtype of {DTYPES}")


def _grid(params: dict) -> tuple[int, int]:
    """The tiled kernels' grid; NotRunnable, before anything is allocated or compiled, where CUDA cannot launch it."""
    grid = (cdiv(params["seq_len"], params["block_m"]), params["batch"] * params["heads"])
    require_grids("numba/cuda attention", [(grid, TILED_GRID)], TOO_MANY_HEADS)
    return grid


@kernel(scenario="attention", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """One kernel: per query tile, K and V streamed through in tiles, online softmax, nothing L×L stored."""
    grid = _grid(params)
    _check(inputs, out)
    scale = np.float32(1.0 / math.sqrt(params["head_dim"]))
    args = (inputs["q"], inputs["k"], inputs["v"], out, scale)
    return _launcher([("flash", grid, 2 * params["block_m"], args)], params, opts)


@kernel(scenario="attention", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """Scores, softmax and P·V as three kernels; S and P (L×L per head) stored in the case's dtype."""
    grid, row_grid = _grid(params), (cdiv(params["batch"] * params["heads"] * params["seq_len"], ROWS),)
    require_grids("numba/cuda attention", [(row_grid, (f"blocks of {ROWS} rows",))], TOO_MANY_HEADS)
    _check(inputs, out)
    shape = (params["batch"], params["heads"], params["seq_len"], params["seq_len"])
    s, p = cuda.device_array(shape, dtype=out.dtype), cuda.device_array(shape, dtype=out.dtype)
    scale, threads = np.float32(1.0 / math.sqrt(params["head_dim"])), 2 * params["block_m"]
    steps = [
        ("scores", grid, threads, (inputs["q"], inputs["k"], s, scale)),
        ("softmax", row_grid, ROWS * ROW_THREADS, (s, p)),
        ("pv", grid, threads, (p, inputs["v"], out)),
    ]
    return _launcher(steps, params, opts)
