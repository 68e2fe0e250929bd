"""add_rmsnorm on the host CPU with Numba: the fused kernel against the residual add and rmsnorm's steps.

Unfused walks the family's decomposition: the add (`add_rmsnorm_kernels.add_kernel`) writes h into out[0],
then rmsnorm's three steps — the normalization family's Numba step kernels, reused as they are — read h and
write the statistic, the normalised matrix and y into out[1]. Fused is `add_rmsnorm_kernels.fused_kernel`
(`fused_wide_kernel` where a row is wider than the tile). Halves travel as their uint16 bits; every kernel is
compiled here for exactly its arguments, so no launch compiles, and scratch (the weight in float32) is allocated
here too. The fused kernel holds no per-thread row of h: it reads row i's h back from out[0] (or recomputes it
from x and residual in half precision) while the row is still in L1/L2, which costs less than storing it a
second time (see `add_rmsnorm_kernels`).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from backends.numba.on_cpu.add_rmsnorm_kernels import add_kernel, fused_kernel, fused_wide_kernel
from backends.numba.on_cpu.arrays import storage
from backends.numba.on_cpu.normalization_kernels import CODES, step_kernel
from backends.numba.ops import VECTOR_CODECS
from scenarios.add_rmsnorm import ROW_STATS, STEPS
from scenarios.normalization import kind
from suite.core.decomposition import walk
from suite.core.registry import Launcher, kernel


def _compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
    return dispatcher


def _arrays(inputs: dict[str, Any], out: np.ndarray) -> tuple[str, dict[str, np.ndarray]]:
    """(dtype, the inputs and the two outputs h = out[0] and y = out[1] as the kernels see them)."""
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or any(a.dtype != out.dtype for a in inputs.values()):
        found = {k: str(a.dtype) for k, a in inputs.items()}
        raise ValueError(f"numba/cpu add_rmsnorm: inputs {found} -> out {dtype}; needs one of {list(VECTOR_CODECS)}")
    whole = storage(out)
    return dtype, {name: storage(a) for name, a in inputs.items()} | {"h": whole[0], "y": whole[1]}


@kernel(scenario="add_rmsnorm", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """One kernel: x, residual and weight read once from memory, h and y written once while a row fits `tile`."""
    dtype, env = _arrays(inputs, out)
    cols, tile = out.shape[-1], int(params["tile"])
    arrays, wf = (env["x"], env["residual"], env["weight"], env["h"], env["y"]), np.empty(cols, np.float32)
    if cols > tile:
        args, run = (*arrays, tile, wf), fused_wide_kernel(dtype)
    else:
        args, run = (*arrays, wf), fused_kernel(dtype)
    run = _compiled(run, *args)

    def launch() -> None:
        run(*args)

    return launch


def _step(st: Any, env: dict[str, Any], dtype: str) -> tuple[Any, tuple]:
    """(compiled kernel, arguments) of one step, its output already in `env`."""
    if st.op == "add":
        args = (env["x"], env["residual"], env["h"])
        return _compiled(add_kernel(dtype), *args), args
    if kind(st.op) == "affine":
        weight = env["weight"]
        scratch = (np.empty(weight.size, np.float32), np.empty(0, np.float32))
        args = (env[st.reads[0]], weight, np.empty(0, weight.dtype), env[st.writes], *scratch, CODES[st.op])
    else:
        args = (*(env[t] for t in st.reads), env[st.writes], CODES[st.op])
    return _compiled(step_kernel(kind(st.op), dtype), *args), args


@kernel(scenario="add_rmsnorm", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """The decomposition, one kernel per step; the statistic and the normalised matrix allocated here."""
    dtype, env = _arrays(inputs, out)
    writes = walk(
        STEPS,
        env,
        stats=ROW_STATS,
        stat=lambda: np.empty(out.shape[1], np.float32),
        matrix=lambda: np.empty_like(env["x"]),
    )
    steps = [_step(st, env, dtype) for st in writes]

    def launch() -> None:
        for step, args in steps:
            step(*args)

    return launch
