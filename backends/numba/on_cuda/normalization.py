"""Row normalization (layernorm, rmsnorm, softmax) on CUDA with Numba; the same kernels run in the simulator.

The structure is the CuPy module's: fused, a block of THREADS threads owns a row and holds a chunk of
BLOCK = min(tile, next power of two ≥ cols) columns in a local array of ITEMS = BLOCK / THREADS per thread; a
row of one chunk is read once, a wider one is walked for its statistics (Chan's merge, or an online max with
a rescaled sum) and read again for the output. Unfused walks the scenario's decomposition: a row reduction
per statistic, one elementwise kernel per matrix step on a (rows, chunks) grid.

The kernels are `backends.numba.on_cuda.normalization_kernels`; this module sizes, compiles, records and
launches them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda.normalization_kernels import fused_source, step_source
from backends.numba.record import record_numba
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS, kind
from suite.core import scenario
from suite.core.decomposition import walk
from suite.core.registry import Launch, Launcher, kernels
from suite.kit.launch import cdiv, chunk_columns, row_threads
from suite.kit.launch_shape import block_chosen_by, launch_notes

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None


def geometry(cols: int, params: dict, opts: dict) -> tuple[int, int]:
    """(BLOCK, THREADS) of a case: its chunk of columns, and the threads given a row for the option `block` (or
    from the chunk where it is unset; at most `suite.kit.launch.MAX_ITEMS` local-array items each: a wider
    chunk gets more threads)."""
    block = chunk_columns(cols, int(params["tile"]))
    return block, row_threads(block, BACKEND.option(opts, "block"))


def kernel_sources(op: str, variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    block, threads = geometry(params["cols"], params, {})
    mat, vec, stat = f"{dtype}[:, ::1]", f"{dtype}[::1]", "float32[::1]"
    if variant == "fused":
        args = [mat if n == "x" else vec for n in scenario.get(op).inputs] + [mat]
        return {f"{op} fused": (fused_source(op, block, threads), f"void({', '.join(args)})")}
    out = {}
    for st in DECOMPOSITIONS[op]:
        if kind(st.op) == "reduce":
            out[st.op] = (step_source(st.op, block, threads), f"void({mat}, {stat})")
        else:
            out[st.op] = (step_source(st.op, block, threads), f"void({mat}, {stat}, {vec}, {vec}, {mat})")
    return out


@functools.cache
def _jit(source: Callable[..., None]) -> Any:
    return cuda.jit(source)


def _dispatcher(variant: str, op: str, block: int, threads: int) -> Any:
    """The `cuda.jit` dispatcher of a fused kernel or an unfused step (importable: the resource report rebuilds it)."""
    return _jit((fused_source if variant == "fused" else step_source)(op, block, threads))


def _prepared(
    key: tuple[str, str, int, int], grid: tuple[int, ...], threads: int, stream: Any, args: tuple, name: str
) -> Launcher:
    dispatcher = _dispatcher(*key)
    compiled = None
    if not simulating():
        compiled = dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba((__name__, "_dispatcher", key), args, threads, name=name, compiled=compiled)

    def launch() -> None:
        # Configured at each launch: the simulator's kernel object keeps its last configuration.
        dispatcher[grid, threads, stream](*args)

    return launch


def _check(op: str, inputs: dict[str, Any], out: Any) -> None:
    if str(out.dtype) not in ("float32", "float16") or any(a.dtype != out.dtype for a in inputs.values()):
        raise ValueError(f"numba/cuda {op}: inputs and out must share float32 or float16, got out {out.dtype}")


def fused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(op, inputs, out)
    rows, cols = out.shape
    block, threads = geometry(cols, params, opts)
    args = (*(inputs[n] for n in scenario.get(op).inputs), out)
    stream = stream_arg(opts.get("stream"))
    launch = _prepared(("fused", op, block, threads), (rows,), threads, stream, args, f"{op} fused")
    return Launch(launch, notes=_notes(block, threads, (rows,), 1, opts))


def _notes(block: int, threads: int, grid: tuple[int, ...], kernels: int, opts: dict) -> dict:
    """What the launcher records: the case's chunk, the threads `row_threads` gave it (for the option, or from
    the chunk where none is set), the grid."""
    settings = {"tile": block, "threads": threads, "items": cdiv(block, threads)}
    return launch_notes(settings, grid, block_chosen_by(BACKEND.option(opts, "block")), kernels=kernels)


def _step(st: Any, env: dict[str, Any], block: int, threads: int, stream: Any, placeholder: Any) -> Launcher:
    """One step of the decomposition, its output already in `env`: a row reduction, or an elementwise kernel on
    (rows, chunks) whose unused arguments get `placeholder` (a statistic) or a row of its source (a vector)."""
    rows, cols = env["y"].shape
    src, dst, key = env[st.reads[0]], env[st.writes], ("unfused", st.op, block, threads)
    if kind(st.op) == "reduce":
        return _prepared(key, (rows,), threads, stream, (src, dst), st.op)
    stat = env[st.reads[1]] if kind(st.op) == "rowwise" else placeholder
    w, b = env.get("weight", src[0]), env.get("bias", src[0])
    return _prepared(key, (rows, cdiv(cols, block)), threads, stream, (src, stat, w, b, dst), st.op)


def unfused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(op, inputs, out)
    rows, cols = out.shape
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    env = dict(inputs) | {"y": out}
    placeholder = cuda.device_array(1, dtype=np.float32)
    writes = walk(
        DECOMPOSITIONS[op],
        env,
        stats=ROW_STATS,
        stat=lambda: cuda.device_array(rows, dtype=np.float32),
        matrix=lambda: cuda.device_array((rows, cols), dtype=out.dtype),
    )
    steps = [_step(st, env, block, threads, stream, placeholder) for st in writes]

    def launch() -> None:
        for step in steps:
            step()

    return Launch(launch, notes=_notes(block, threads, (rows,), len(steps), opts))


kernels(DECOMPOSITIONS, backend="numba", fused=fused_entry, unfused=unfused_entry)
