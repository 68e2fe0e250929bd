"""Row normalization (layernorm, rmsnorm, softmax) in CuPy: generated CUDA C, one thread block per row when fused.

Fused: a block of THREADS threads owns a row. A chunk is BLOCK = min(tile, next power of two ≥ cols) columns,
ITEMS = BLOCK / THREADS of them per thread, held in registers. A row of at most BLOCK columns is loaded once and
normalised from registers; a wider row is walked chunk by chunk for its statistics (Chan's merge of chunk means
and M2, or an online max with a rescaled sum) and read again to write the output — the ledger's re-read.
The kernels' text is `backends.cupy.normalization_kernels`; this module sizes, compiles and launches them.

Unfused walks the scenario's decomposition: a row reduction per statistic (one block per row, a strided loop),
and one elementwise kernel per matrix step on a (rows, cdiv(cols, BLOCK)) grid. Matrices are stored in the
case's dtype, statistics in float32. float16 is handled as raw bits with the conversions of `backends.cupy.device`
(no cuda_fp16.h: NVRTC from the wheels has no include path); sqrtf, division and expf are the accurate
ones, the same in both variants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.build import build
from backends.cupy.normalization_kernels import fused_source, step_source
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS, kind
from suite.core import scenario
from suite.core.decomposition import walk
from suite.core.registry import Launch, Launcher, kernels
from suite.kit.launch import cdiv, chunk_columns, row_threads
from suite.kit.launch_shape import block_chosen_by, launch_notes

Step = tuple[Any, tuple[int, ...], tuple[Any, ...]]
"""(compiled kernel, grid, arguments) of one kernel of a variant."""


def _compiled(source: tuple[str, str], threads: int) -> Any:
    """The kernel, recorded for the resource report (`build` caches the compile)."""
    return build(*source, threads=threads)


def geometry(cols: int, params: dict, opts: dict) -> tuple[int, int]:
    """(BLOCK, THREADS) of a case: its chunk of columns, and the threads given a row for the options `block` and
    `max_items` (the latter shows what a fused kernel holding too much of its row per thread costs)."""
    block = chunk_columns(cols, int(params["tile"]))
    return block, row_threads(block, BACKEND.option(opts, "block"), BACKEND.option(opts, "max_items"))


def _launcher(launches: list[Step], block: int, threads: int, opts: dict) -> Launcher:
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for k, grid, args in launches:
                k(grid, (threads,), args)

    settings = {"tile": block, "threads": threads, "items": cdiv(block, threads)}  # threads: row_threads of the options
    by = block_chosen_by(BACKEND.option(opts, "block"))
    return Launch(launch, notes=launch_notes(settings, launches[0][1], by, kernels=len(launches)))


def fused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    k = _compiled(fused_source(op, dtype, block, threads), threads)
    args = (*(inputs[n] for n in scenario.get(op).inputs), out, np.int64(cols))
    return _launcher([(k, (rows,), args)], block, threads, opts)


def _step(st: Any, env: dict[str, Any], dtype: str, block: int, threads: int, placeholder: Any) -> Step:
    """One step of the decomposition, its output already in `env`: a row reduction, or an elementwise kernel on
    (rows, chunks) whose unused pointers get `placeholder`."""
    rows, cols = env["y"].shape
    k = _compiled(step_source(st.op, dtype, block, threads), threads)
    src, dst = env[st.reads[0]], env[st.writes]
    if kind(st.op) == "reduce":
        return k, (rows,), (src, dst, np.int64(cols))
    stat = env[st.reads[1]] if kind(st.op) == "rowwise" else placeholder
    w, b = env.get("weight", src), env.get("bias", src)
    return k, (rows, cdiv(cols, block)), (src, stat, w, b, dst, np.int64(cols))


def unfused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    rows, cols = out.shape
    (block, threads), dtype = geometry(cols, params, opts), np.dtype(out.dtype).name
    env = dict(inputs) | {"y": out}
    placeholder = TARGET.empty((1,), "float32")
    steps = walk(
        DECOMPOSITIONS[op],
        env,
        stats=ROW_STATS,
        stat=lambda: TARGET.empty((rows,), "float32"),
        matrix=lambda: TARGET.empty((rows, cols), dtype),
    )
    return _launcher([_step(st, env, dtype, block, threads, placeholder) for st in steps], block, threads, opts)


kernels(DECOMPOSITIONS, backend="cupy", fused=fused_entry, unfused=unfused_entry)
