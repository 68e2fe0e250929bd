"""Row normalization (layernorm, rmsnorm, softmax) on the host CPU with Numba: fused against the unfused steps.

Unfused walks the scenario's decomposition: one parallel loop over rows per step, each reading its inputs and
writing its output (a matrix in the case's dtype, or a float32 row statistic). Fused is one parallel loop over
rows. `tile` is honoured as the chunk the statistics are taken over: a row of at most `tile` columns is one
chunk, whose passes (statistics, then output) read it from L1/L2 — float32 rows in place (a copy into a
buffer measured 30% slower), float16 rows converted once into a per-thread float32 buffer, which also holds
softmax's exponentials between passes. A wider row is walked chunk by chunk for its statistics (Chan's merge
for layernorm, an online max for softmax) and read once more to write the output: the ledger's re-read,
which on a CPU usually still hits L2. Stores are ordinary ones (write-allocate), as the ledger's CPU store
model assumes; non-temporal stores were tried and helped the unfused steps, not the fused kernel.

Both variants use the same scalar code, compile with the same fast-math flags and vectorise the same way:
`reassoc` lets LLVM keep several running sums in vector lanes, `contract` allows FMA. exp is
`exp_float32` (branch-free, vectorised), not libm's `expf`, which would cost softmax two thirds of its speed;
max is LLVM's vectorisable `maxnum`. Half-precision arrays travel as their uint16 bits and are converted in
the loops (`VECTOR_CODECS`: F16C where the host has it); weight and bias are converted once per call into
float32 scratch allocated by the entry.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from backends.numba.ops import NEG_INF, ONE, VECTOR_CODECS, ZERO, exp_float32, fmax32
from scenarios.normalization import DECOMPOSITIONS, EPS, ROW_STATS, kind
from suite.core.registry import Launcher, kernel

FASTMATH = {"reassoc", "contract"}
"""No `nnan`/`ninf`: softmax starts its running max at −inf, and a NaN must still come out as a NaN."""
EPS32 = np.float32(EPS)


@register_jitable
def _square(v: float) -> float:
    return v * v


@register_jitable
def _rstd(s: float) -> float:
    return ONE / math.sqrt(s + EPS32)


@register_jitable
def _recip(s: float) -> float:
    return ONE / s


CODES = {"mean": 0, "mean_square": 1, "max": 2, "sum": 3, "center": 0, "shift": 0, "normalize": 1, "divide": 2,
         "exp": 0, "scale": 0, "scale_shift": 1}  # fmt: skip
"""A step's op within its template (kind): one compiled kernel per template and dtype, the op picked per call
by an argument and dispatched outside the column loop — four templates compile faster than eleven kernels."""


def _storage(a: np.ndarray) -> np.ndarray:
    """The array as the kernels see it: halves as their uint16 bits (a view, no copy)."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


# Unfused: one kernel per step ----------------------------------------------------------------------------------


@functools.cache
def _step_kernel(template: str, dtype: str) -> Any:
    """The unfused template `template` (see scenarios.normalization.kind) for arrays of `dtype`."""
    load, store = VECTOR_CODECS[dtype]
    if template == "reduce":

        def reduce_rows(src, stat, code):  # type: ignore[no-untyped-def]
            rows, cols = src.shape
            for r in prange(rows):
                row = src[r]
                if code == 2:
                    acc = NEG_INF
                    for j in range(cols):
                        acc = fmax32(acc, load(row[j]))
                elif code == 1:
                    acc = ZERO
                    for j in range(cols):
                        acc += _square(load(row[j]))
                else:
                    acc = ZERO
                    for j in range(cols):
                        acc += load(row[j])
                stat[r] = acc / np.float32(cols) if code <= 1 else acc

        return njit(parallel=True, fastmath=FASTMATH)(reduce_rows)
    if template == "rowwise":

        def rowwise(src, stat, dst, code):  # type: ignore[no-untyped-def]
            rows, cols = src.shape
            for r in prange(rows):
                row, out = src[r], dst[r]
                if code == 0:
                    a = stat[r]
                    for j in range(cols):
                        out[j] = store(load(row[j]) - a)
                else:
                    a = _rstd(stat[r]) if code == 1 else _recip(stat[r])
                    for j in range(cols):
                        out[j] = store(load(row[j]) * a)

        return njit(parallel=True, fastmath=FASTMATH)(rowwise)
    if template == "map":

        def exp_map(src, dst, code):  # type: ignore[no-untyped-def]
            rows, cols = src.shape
            for r in prange(rows):
                row, out = src[r], dst[r]
                for j in range(cols):
                    out[j] = store(exp_float32(load(row[j])))

        return njit(parallel=True, fastmath=FASTMATH)(exp_map)

    def affine(src, weight, bias, dst, wf, bf, code):  # type: ignore[no-untyped-def]
        rows, cols = src.shape
        for j in range(weight.size):
            wf[j] = load(weight[j])
        for j in range(bias.size):
            bf[j] = load(bias[j])
        for r in prange(rows):
            row, out = src[r], dst[r]
            if code == 1:
                for j in range(cols):
                    out[j] = store(load(row[j]) * wf[j] + bf[j])
            else:
                for j in range(cols):
                    out[j] = store(load(row[j]) * wf[j])

    return njit(parallel=True, fastmath=FASTMATH)(affine)


def _compiled(dispatcher: Any, *args: Any) -> Any:
    """The dispatcher, compiled now for exactly these arguments so that no launch compiles."""
    dispatcher.compile(tuple(numba.typeof(a) for a in args))
    return dispatcher


# Fused: one kernel, a row at a time ------------------------------------------------------------------------------


@functools.cache
def _stage(dtype: str) -> Any:
    """chunk = stage(row, start, n, buf): x[start:start+n] as float32 values the passes over a chunk read.

    float32: the row itself — after the first pass it sits in L1/L2, and copying it into a buffer only costs
    (a measured 30% of the kernel's bandwidth). float16: converted once into the thread's buffer.
    """
    load = VECTOR_CODECS[dtype][0]
    if dtype == "float32":

        @register_jitable
        def view(row, start, n, buf):  # type: ignore[no-untyped-def]
            return row[start : start + n]

        return view

    @register_jitable
    def convert(row, start, n, buf):  # type: ignore[no-untyped-def]
        src = row[start : start + n]  # index from 0: `row[start + j]` may be negative to LLVM, and not vectorise
        for j in range(n):
            buf[j] = load(src[j])
        return buf[:n]

    return convert


@register_jitable
def _moments(chunk):  # type: ignore[no-untyped-def]
    """(mean, M2 = Σ(v − mean)²) of a float32 chunk, in two passes: no cancellation for rows far from zero."""
    total = ZERO
    for j in range(chunk.size):
        total += chunk[j]
    mean = total / np.float32(chunk.size)
    m2 = ZERO
    for j in range(chunk.size):
        d = chunk[j] - mean
        m2 += d * d
    return mean, m2


@register_jitable
def _square_sum(chunk):  # type: ignore[no-untyped-def]
    total = ZERO
    for j in range(chunk.size):
        total += chunk[j] * chunk[j]
    return total


@register_jitable
def _max(chunk):  # type: ignore[no-untyped-def]
    m = NEG_INF
    for j in range(chunk.size):
        m = fmax32(m, chunk[j])
    return m


@register_jitable
def _exp_sum(chunk, m, e):  # type: ignore[no-untyped-def]
    """Σ exp(v − m) over a chunk, each term also written to the float32 row `e`, which must not be a view
    overlapping the chunk: LLVM would then find its runtime overlap check failing and run the loop scalar."""
    total = ZERO
    for j in range(chunk.size):
        v = exp_float32(chunk[j] - m)
        e[j] = v
        total += v
    return total


@register_jitable
def _max_sum(chunk):  # type: ignore[no-untyped-def]
    """(m, Σ exp(v − m)) with m the chunk's max."""
    m = _max(chunk)
    total = ZERO
    for j in range(chunk.size):
        total += exp_float32(chunk[j] - m)
    return m, total


@functools.cache
def _fused_kernel(op: str, dtype: str) -> Any:
    """One parallel loop over rows; `buf` is the thread's float32 scratch of 2 × chunk: the converted chunk of a
    half-precision row, then softmax's exponentials."""
    load, store = VECTOR_CODECS[dtype]
    stage = _stage(dtype)

    @register_jitable
    def layernorm_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        if cols <= tile:  # one chunk: the row stays on chip (L1/L2) between the passes
            chunk = stage(row, 0, cols, buf)
            mean, m2 = _moments(chunk)
            rstd = _rstd(m2 / np.float32(cols))
            for j in range(cols):
                out[j] = store((chunk[j] - mean) * rstd * wf[j] + bf[j])
            return
        mean, m2, count = ZERO, ZERO, ZERO  # Chan et al.: merge each chunk's mean and M2
        for start in range(0, cols, tile):
            n = min(tile, cols - start)
            mean_c, m2_c = _moments(stage(row, start, n, buf))
            nc = np.float32(n)
            total = count + nc
            delta = mean_c - mean
            mean += delta * (nc / total)
            m2 += m2_c + delta * delta * (count * nc / total)
            count = total
        rstd = _rstd(m2 / np.float32(cols))
        for j in range(cols):  # the re-read
            out[j] = store((load(row[j]) - mean) * rstd * wf[j] + bf[j])

    @register_jitable
    def rmsnorm_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        if cols <= tile:
            chunk = stage(row, 0, cols, buf)
            rstd = _rstd(_square_sum(chunk) / np.float32(cols))
            for j in range(cols):
                out[j] = store(chunk[j] * rstd * wf[j])
            return
        total = ZERO
        for start in range(0, cols, tile):
            total += _square_sum(stage(row, start, min(tile, cols - start), buf))
        rstd = _rstd(total / np.float32(cols))
        for j in range(cols):  # the re-read
            out[j] = store(load(row[j]) * rstd * wf[j])

    @register_jitable
    def softmax_row(row, out, buf, wf, bf, tile):  # type: ignore[no-untyped-def]
        cols = row.size
        if cols <= tile:
            chunk = stage(row, 0, cols, buf)
            e = buf[cols : 2 * cols]  # not the chunk: overlapping views would stop LLVM vectorising
            inv = _recip(_exp_sum(chunk, _max(chunk), e))
            for j in range(cols):
                out[j] = store(e[j] * inv)
            return
        m, total = NEG_INF, ZERO  # online softmax: rescale the running sum whenever the max grows
        for start in range(0, cols, tile):
            m_c, total_c = _max_sum(stage(row, start, min(tile, cols - start), buf))
            m_new = fmax32(m, m_c)
            total = total * exp_float32(m - m_new) + total_c * exp_float32(m_c - m_new)
            m = m_new
        inv = _recip(total)
        for j in range(cols):  # the re-read
            out[j] = store(exp_float32(load(row[j]) - m) * inv)

    row_fn = {"layernorm": layernorm_row, "rmsnorm": rmsnorm_row, "softmax": softmax_row}[op]

    @njit(parallel=True, fastmath=FASTMATH)
    def fused_rows(x, weight, bias, y, tile, buf, wf, bf):  # type: ignore[no-untyped-def]
        rows = x.shape[0]
        for j in range(weight.size):
            wf[j] = load(weight[j])
        for j in range(bias.size):
            bf[j] = load(bias[j])
        for r in prange(rows):
            row_fn(x[r], y[r], buf[numba.get_thread_id()], wf, bf, tile)

    return fused_rows


# Entries ---------------------------------------------------------------------------------------------------------


def _dtype(scenario: str, inputs: dict[str, Any], out: np.ndarray) -> str:
    dtype = str(out.dtype)
    if dtype not in VECTOR_CODECS or any(a.dtype != out.dtype for a in inputs.values()):
        found = {k: str(a.dtype) for k, a in inputs.items()}
        raise ValueError(f"numba/cpu {scenario}: inputs {found} -> out {dtype}; needs one of {list(VECTOR_CODECS)}")
    return dtype


def _vector(arrays: dict[str, Any], name: str, like: np.ndarray) -> np.ndarray:
    """weight or bias in storage form; an empty array where the op has none."""
    return _storage(arrays[name]) if name in arrays else np.empty(0, dtype=like.dtype)


def _scratch(width: int, dtype: Any) -> np.ndarray:
    """One row of `width` per thread of Numba's pool (indexed by numba.get_thread_id())."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width), dtype=dtype)


def fused_entry(op: str, inputs: dict[str, Any], out: np.ndarray, params: dict) -> Launcher:
    dtype = _dtype(op, inputs, out)
    x, y = _storage(inputs["x"]), _storage(out)
    weight, bias = _vector(inputs, "weight", x), _vector(inputs, "bias", x)
    buf = _scratch(2 * min(x.shape[1], int(params["tile"])), np.float32)
    wf, bf = np.empty(weight.size, np.float32), np.empty(bias.size, np.float32)
    args = (x, weight, bias, y, int(params["tile"]), buf, wf, bf)
    fused_rows = _compiled(_fused_kernel(op, dtype), *args)

    def launch() -> None:
        fused_rows(*args)

    return launch


def unfused_entry(op: str, inputs: dict[str, Any], out: np.ndarray, params: dict) -> Launcher:
    """The scenario's decomposition, one kernel per step, each output allocated here and reused every launch."""
    dtype = _dtype(op, inputs, out)
    rows, cols = out.shape
    env = {name: _storage(a) for name, a in inputs.items()} | {"y": _storage(out)}
    steps = []
    for st in DECOMPOSITIONS[op]:
        if st.writes not in env:
            env[st.writes] = np.empty(rows, np.float32) if st.writes in ROW_STATS else np.empty_like(env["x"])
        code = CODES[st.op]
        if kind(st.op) == "affine":
            weight, bias = env["weight"], _vector(env, "bias", env["x"])
            scratch = (np.empty(cols, np.float32), np.empty(bias.size, np.float32))
            args = (env[st.reads[0]], weight, bias, env[st.writes], *scratch, code)
        else:
            args = (*(env[t] for t in st.reads), env[st.writes], code)
        steps.append((_compiled(_step_kernel(kind(st.op), dtype), *args), args))

    def launch() -> None:
        for step, args in steps:
            step(*args)

    return launch


def _register(op: str) -> None:
    @kernel(scenario=op, backend="numba", variant="fused", device="cpu")
    def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
        """One kernel: each row read once while it fits `tile`, statistics and output in float32."""
        return fused_entry(op, inputs, out, params)

    @kernel(scenario=op, backend="numba", variant="unfused", device="cpu")
    def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
        """The scenario's decomposition, one kernel per step, intermediates in device (host) memory."""
        return unfused_entry(op, inputs, out, params)


for _op in DECOMPOSITIONS:
    _register(_op)
