"""Row normalization (layernorm, rmsnorm, softmax) on the host CPU with Numba: fused against the unfused steps.

Unfused walks the scenario's decomposition: one parallel loop over rows per step, each reading its inputs and
writing its output (a matrix in the case's dtype, or a float32 row statistic). Fused is one parallel loop over
rows, pipelined over blocks of rows where a row fits one chunk (`normalization_blocks`). `tile` is honoured as the chunk the statistics are taken over: a row of at most `tile` columns is one
chunk, whose passes (statistics, then output) read it from L1/L2 — float32 rows in place (a copy into a
buffer measured 30% slower), float16 rows converted once into a per-thread float32 buffer, which also holds
softmax's exponentials between passes. A wider row is walked chunk by chunk for its statistics (Chan's merge
for layernorm, an online max for softmax) and read once more to write the output: the ledger's re-read,
which on a CPU usually still hits L2. Stores are ordinary ones (write-allocate), as the ledger's CPU store
model assumes; non-temporal stores were tried and helped the unfused steps, not the fused kernel.

The kernels are `normalization_kernels` (and the fused kernel's rows `normalization_rows`); this module
prepares their arguments — halves as their uint16 bits, weight and bias converted once per call into float32
scratch allocated here — and compiles them for exactly those arguments, so that no launch compiles.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from backends.numba.on_cpu.arrays import per_thread, storage
from backends.numba.on_cpu.normalization_kernels import CODES, fused_kernel, step_kernel
from backends.numba.ops import VECTOR_CODECS
from scenarios.normalization import DECOMPOSITIONS, ROW_STATS, kind
from suite.core.decomposition import walk
from suite.core.registry import Launcher, kernels


def _compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
    return dispatcher


def _dtype(scenario: str, inputs: dict[str, Any], out: np.ndarray) -> str:
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or any(a.dtype != out.dtype for a in inputs.values()):
        found = {k: str(a.dtype) for k, a in inputs.items()}
        raise ValueError(f"numba/cpu {scenario}: inputs {found} -> out {dtype}; needs one of {list(VECTOR_CODECS)}")
    return dtype


def _vector(arrays: dict[str, Any], name: str, like: np.ndarray) -> np.ndarray:
    """weight or bias in storage form; an empty array where the op has none."""
    return storage(arrays[name]) if name in arrays else np.empty(0, dtype=like.dtype)


def fused_entry(op: str, inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """One kernel: each row read once while it fits `tile`, statistics and output in float32."""
    dtype = _dtype(op, inputs, out)
    x, y = storage(inputs["x"]), storage(out)
    weight, bias = _vector(inputs, "weight", x), _vector(inputs, "bias", x)
    buf = per_thread(2 * min(x.shape[1], int(params["tile"])), np.float32)
    wf, bf = np.empty(weight.size, np.float32), np.empty(bias.size, np.float32)
    args = (x, weight, bias, y, int(params["tile"]), buf, wf, bf)
    fused_rows = _compiled(fused_kernel(op, dtype), *args)

    def launch() -> None:
        fused_rows(*args)

    return launch


def _step(st: Any, env: dict[str, Any], dtype: str) -> tuple[Any, tuple]:
    """(compiled kernel, arguments) of one step, its output already in `env`; the affine step gets float32
    scratch for weight and bias."""
    if kind(st.op) == "affine":
        weight, bias = env["weight"], _vector(env, "bias", env["x"])
        scratch = (np.empty(weight.size, np.float32), np.empty(bias.size, np.float32))
        args = (env[st.reads[0]], weight, bias, env[st.writes], *scratch, CODES[st.op])
    else:
        args = (*(env[t] for t in st.reads), env[st.writes], CODES[st.op])
    return _compiled(step_kernel(kind(st.op), dtype), *args), args


def unfused_entry(op: str, inputs: dict[str, Any], out: np.ndarray, params: dict, opts: dict) -> Launcher:
    """The scenario's decomposition, one kernel per step, intermediates in device (host) memory, each allocated
    here and reused every launch."""
    dtype = _dtype(op, inputs, out)
    env = {name: storage(a) for name, a in inputs.items()} | {"y": storage(out)}
    writes = walk(
        DECOMPOSITIONS[op],
        env,
        stats=ROW_STATS,
        stat=lambda: np.empty(out.shape[0], np.float32),
        matrix=lambda: np.empty_like(env["x"]),
    )
    steps = [_step(st, env, dtype) for st in writes]

    def launch() -> None:
        for step, args in steps:
            step(*args)

    return launch


kernels(DECOMPOSITIONS, backend="numba", device="cpu", fused=fused_entry, unfused=unfused_entry)
