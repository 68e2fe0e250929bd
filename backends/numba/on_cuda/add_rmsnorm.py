"""add_rmsnorm on CUDA with Numba; the same kernels run in the simulator.

Fused is `add_rmsnorm_kernels.fused_source`, one block per row; unfused the residual add on a (rows, chunks)
grid writing h = out[0], then the normalization family's rmsnorm steps (its `_step`, reused as it is) reading h
and writing y = out[1]. The geometry (BLOCK, THREADS) is the normalization family's for the same row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import simulating, stream_arg
from backends.numba.on_cuda.add_rmsnorm_kernels import add_source, fused_source
from backends.numba.on_cuda.normalization import _notes, _step, geometry
from backends.numba.on_cuda.normalization import kernel_sources as norm_sources
from backends.numba.record import record_numba
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from suite.core.decomposition import walk
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import cdiv

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None


def kernel_sources(variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    block, threads = geometry(params["cols"], params, {})
    mat, vec = f"{dtype}[:, ::1]", f"{dtype}[::1]"
    if variant == "fused":
        return {"add_rmsnorm fused": (fused_source(block, threads), f"void({mat}, {mat}, {vec}, {mat}, {mat})")}
    return {
        "residual add": (add_source(block, threads), f"void({mat}, {mat}, {mat})"),
        **norm_sources("rmsnorm", "unfused", params, dtype),
    }


@functools.cache
def _dispatcher(variant: str, block: int, threads: int) -> Any:
    """The `cuda.jit` dispatcher of the fused kernel or the add (importable: the resource report rebuilds it)."""
    return cuda.jit((fused_source if variant == "fused" else add_source)(block, threads))


def _prepared(
    key: tuple[str, int, int], grid: tuple[int, ...], threads: int, stream: Any, args: tuple, name: str
) -> Launcher:
    dispatcher = _dispatcher(*key)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
    record_numba((__name__, "_dispatcher", key), args, threads, name=name, compiled=compiled)

    def launch() -> None:
        dispatcher[grid, threads, stream](*args)  # configured at each launch (the simulator keeps the last)

    return launch


def _check(inputs: dict[str, Any], out: Any) -> None:
    if str(out.dtype) not in ("float32", "float16") or any(a.dtype != out.dtype for a in inputs.values()):
        raise ValueError(f"numba/cuda add_rmsnorm: inputs and out must share float32 or float16, got {out.dtype}")


@kernel(scenario="add_rmsnorm", backend="numba", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(inputs, out)
    rows, cols = out.shape[1], out.shape[2]
    block, threads = geometry(cols, params, opts)
    args = (inputs["x"], inputs["residual"], inputs["weight"], out[0], out[1])
    stream = stream_arg(opts.get("stream"))
    launch = _prepared(("fused", block, threads), (rows,), threads, stream, args, "add_rmsnorm fused")
    return Launch(launch, notes=_notes(block, threads, (rows,), 1, opts))


@kernel(scenario="add_rmsnorm", backend="numba", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(inputs, out)
    rows, cols = out.shape[1], out.shape[2]
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    env = dict(inputs) | {"h": out[0], "y": out[1]}
    placeholder = cuda.device_array(1, dtype=np.float32)
    steps = list(
        walk(
            STEPS,
            env,
            stats=ROW_STATS,
            stat=lambda: cuda.device_array(rows, dtype=np.float32),
            matrix=lambda: cuda.device_array((rows, cols), dtype=out.dtype),
        )
    )
    add = _prepared(
        ("unfused", block, threads),
        (rows, cdiv(cols, block)),
        threads,
        stream,
        (env["x"], env["residual"], env["h"]),
        "residual add",
    )
    launches = [add, *(_step(st, env, block, threads, stream, placeholder) for st in steps[1:])]

    def launch() -> None:
        for step in launches:
            step()

    return Launch(launch, notes=_notes(block, threads, (rows,), len(launches), opts))
