"""Row normalization (layernorm, rmsnorm, softmax) on CUDA with Numba; the same kernels run in the simulator.

The structure is the CuPy module's: fused, a block of THREADS threads owns a row and holds a chunk of
BLOCK = min(tile, next power of two ≥ cols) columns in a local array of ITEMS = BLOCK / THREADS per thread; a
row of one chunk is read once, a wider one is walked for its statistics (Chan's merge, or an online max with
a rescaled sum) and read again for the output. Unfused walks the scenario's decomposition: a row reduction
per statistic, one elementwise kernel per matrix step on a (rows, chunks) grid.

Block reductions go through shared memory in two levels (see `_reductions`), not warp shuffles: the
simulator has none. Kernels are built per (op, BLOCK, THREADS): ITEMS must be a compile-time constant for the local array.
They compute in float32 (np.float32 constants: a bare Python float would promote to float64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.record import record_numba
from scenarios.normalization import DECOMPOSITIONS, EPS, ROW_STATS, kind
from suite.core.launch import cdiv, chunk_columns, row_threads
from suite.core.registry import Launcher, kernel

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ZERO, ONE, EPS32 = np.float32(0.0), np.float32(1.0), np.float32(EPS)
NEG_INF = np.float32(-np.inf)
SUB, NORMALIZE, DIVIDE, EXP, SCALE, SCALE_SHIFT = range(6)
ELEMENTWISE_CODES = {"center": SUB, "shift": SUB, "normalize": NORMALIZE, "divide": DIVIDE, "exp": EXP,
                     "scale": SCALE, "scale_shift": SCALE_SHIFT}  # fmt: skip


@functools.cache
def _reductions() -> tuple[Any, Any]:
    """block_sum and block_max (device functions): every thread gets the block's result.

    Two levels through shared memory — 32 threads fold THREADS/32 partials each, then thread 0 folds the 32
    pairwise — so four barriers whatever the block size: the simulator's cost is its barriers, and a tree of
    THREADS would take 2 + log₂(THREADS).
    """

    def block_sum(v, smem):  # type: ignore[no-untyped-def]
        t, n = cuda.threadIdx.x, cuda.blockDim.x
        cuda.syncthreads()  # the previous reduction has read smem[0]
        smem[t] = v
        cuda.syncthreads()
        if t < 32:
            acc = smem[t]
            for j in range(t + 32, n, 32):
                acc += smem[j]
            smem[t] = acc
        cuda.syncthreads()
        if t == 0:  # a pairwise fold: rounds like a tree, without a barrier per level
            width = 16
            while width > 0:
                for j in range(width):
                    smem[j] += smem[j + width]
                width //= 2
        cuda.syncthreads()
        return smem[0]

    def block_max(v, smem):  # type: ignore[no-untyped-def]
        t, n = cuda.threadIdx.x, cuda.blockDim.x
        cuda.syncthreads()
        smem[t] = v
        cuda.syncthreads()
        if t < 32:
            acc = smem[t]
            for j in range(t + 32, n, 32):
                acc = max(acc, smem[j])
            smem[t] = acc
        cuda.syncthreads()
        if t == 0:
            width = 16
            while width > 0:
                for j in range(width):
                    smem[j] = max(smem[j], smem[j + width])
                width //= 2
        cuda.syncthreads()
        return smem[0]

    return cuda.jit(device=True)(block_sum), cuda.jit(device=True)(block_max)


@functools.cache
def fused_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """The fused kernel as a Python function (what `cuda.jit` and `cuda.compile_ptx` take)."""
    items = cdiv(block, threads)
    block_sum, block_max = _reductions()

    def layernorm(x, w, b, y):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        mean, m2, count = ZERO, ZERO, ZERO
        for i in range(chunks):  # one chunk when cols <= block: then v is the row
            start = i * block
            n = np.float32(min(block, cols - start))
            s = ZERO
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else ZERO
                s += v[k]
            mean_c = block_sum(s, smem) / n
            q = ZERO
            for k in range(items):
                c = t + k * threads
                d = v[k] - mean_c if c < block and start + c < cols else ZERO
                q += d * d
            m2_c = block_sum(q, smem)
            total = count + n
            delta = mean_c - mean
            mean += delta * (n / total)  # Chan et al.; exact for the first chunk
            m2 += m2_c + delta * delta * (count * n / total)
            count = total
        rstd = ONE / math.sqrt(m2 / np.float32(cols) + EPS32)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    val = v[k] if chunks == 1 else np.float32(x[row, start + c])  # else: the re-read
                    y[row, start + c] = (val - mean) * rstd * np.float32(w[start + c]) + np.float32(b[start + c])

    def rmsnorm(x, w, y):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        q = ZERO
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else ZERO
                q += v[k] * v[k]
        rstd = ONE / math.sqrt(block_sum(q, smem) / np.float32(cols) + EPS32)
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    val = v[k] if chunks == 1 else np.float32(x[row, start + c])  # else: the re-read
                    y[row, start + c] = val * rstd * np.float32(w[start + c])

    def softmax(x, y):  # type: ignore[no-untyped-def]
        cols = x.shape[1]
        smem = cuda.shared.array(threads, np.float32)
        v = cuda.local.array(items, np.float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        chunks = (cols + block - 1) // block
        m, total = NEG_INF, ZERO
        for i in range(chunks):  # online softmax: rescale the running sum when the max grows
            start = i * block
            mc = NEG_INF
            for k in range(items):
                c = t + k * threads
                v[k] = np.float32(x[row, start + c]) if c < block and start + c < cols else NEG_INF
                mc = max(mc, v[k])
            m_new = max(m, block_max(mc, smem))
            s = ZERO
            for k in range(items):
                v[k] = math.exp(v[k] - m_new)  # exp(-inf) = 0 for the items past the row
                s += v[k]
            total = total * math.exp(m - m_new) + block_sum(s, smem)
            m = m_new
        inv = ONE / total
        for i in range(chunks):
            start = i * block
            for k in range(items):
                c = t + k * threads
                if c < block and start + c < cols:
                    e = v[k] if chunks == 1 else math.exp(np.float32(x[row, start + c]) - m)  # else: the re-read
                    y[row, start + c] = e * inv

    return {"layernorm": layernorm, "rmsnorm": rmsnorm, "softmax": softmax}[op]


@functools.cache
def step_source(op: str, block: int, threads: int) -> Callable[..., None]:
    """One unfused step as a Python function: a row reduction, or an elementwise kernel on (rows, chunks)."""
    items = cdiv(block, threads)
    block_sum, block_max = _reductions()
    template = kind(op)

    if template == "reduce":
        is_max, square, average = op == "max", op == "mean_square", op in ("mean", "mean_square")

        def reduce_rows(src, stat):  # type: ignore[no-untyped-def]
            cols = src.shape[1]
            smem = cuda.shared.array(threads, np.float32)
            row, t = cuda.blockIdx.x, cuda.threadIdx.x
            acc = NEG_INF if is_max else ZERO
            for c in range(t, cols, threads):
                val = np.float32(src[row, c])
                acc = max(acc, val) if is_max else acc + (val * val if square else val)
            acc = block_max(acc, smem) if is_max else block_sum(acc, smem)
            if t == 0:
                stat[row] = acc / np.float32(cols) if average else acc

        return reduce_rows

    code = ELEMENTWISE_CODES[op]  # an int: string comparisons do not compile for CUDA

    def pointwise(src, stat, w, b, dst):  # type: ignore[no-untyped-def]
        cols = src.shape[1]
        row, t, start = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockIdx.y * block
        s = ZERO
        if code == SUB:
            s = stat[row]
        elif code == NORMALIZE:
            s = ONE / math.sqrt(stat[row] + EPS32)
        elif code == DIVIDE:
            s = ONE / stat[row]
        for k in range(items):
            c = start + t + k * threads
            if t + k * threads < block and c < cols:
                val = np.float32(src[row, c])
                if code == SUB:
                    val = val - s
                elif code == NORMALIZE or code == DIVIDE:  # noqa: SIM109 - two int compares on CUDA
                    val = val * s
                elif code == EXP:
                    val = math.exp(val)
                elif code == SCALE:
                    val = val * np.float32(w[c])
                else:
                    val = val * np.float32(w[c]) + np.float32(b[c])
                dst[row, c] = val

    return pointwise


def geometry(cols: int, params: dict, opts: dict) -> tuple[int, int]:
    """(BLOCK, THREADS) of a case: its chunk of columns, and the threads given a row for the option `block`
    (at most `suite.core.launch.MAX_ITEMS` local-array items each: a wider chunk gets more threads)."""
    block = chunk_columns(cols, int(params["tile"]))
    return block, row_threads(block, BACKEND.option(opts, "block"))


FUSED_INPUTS = {"layernorm": ("x", "weight", "bias"), "rmsnorm": ("x", "weight"), "softmax": ("x",)}


def kernel_sources(op: str, variant: str, params: dict, dtype: str) -> dict[str, tuple[Callable[..., None], str]]:
    """A variant's kernels as name -> (Python function, signature), for compiling without a GPU."""
    block, threads = geometry(params["cols"], params, {})
    mat, vec, stat = f"{dtype}[:, ::1]", f"{dtype}[::1]", "float32[::1]"
    if variant == "fused":
        args = [mat if n == "x" else vec for n in FUSED_INPUTS[op]] + [mat]
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


def _prepared(key: tuple[str, str, int, int], grid: tuple[int, ...], threads: int, stream: Any, args: tuple,
              name: str) -> Callable:  # fmt: skip
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
    args = (*(inputs[n] for n in FUSED_INPUTS[op]), out)
    stream = stream_arg(opts.get("stream"))
    return _prepared(("fused", op, block, threads), (rows,), threads, stream, args, f"{op} fused")


def unfused_entry(op: str, inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    _check(op, inputs, out)
    rows, cols = out.shape
    (block, threads), stream = geometry(cols, params, opts), stream_arg(opts.get("stream"))
    env = dict(inputs) | {"y": out}
    placeholder = cuda.device_array(1, dtype=np.float32)
    steps = []
    for st in DECOMPOSITIONS[op]:
        if st.writes not in env:
            stat = st.writes in ROW_STATS
            env[st.writes] = cuda.device_array(rows if stat else (rows, cols), dtype=np.float32 if stat else out.dtype)
        src, dst, key = env[st.reads[0]], env[st.writes], ("unfused", st.op, block, threads)
        if kind(st.op) == "reduce":
            steps.append(_prepared(key, (rows,), threads, stream, (src, dst), st.op))
            continue
        stat_arg = env[st.reads[1]] if kind(st.op) == "rowwise" else placeholder
        w, b = env.get("weight", src[0]), env.get("bias", src[0])
        grid = (rows, cdiv(cols, block))
        steps.append(_prepared(key, grid, threads, stream, (src, stat_arg, w, b, dst), st.op))

    def launch() -> None:
        for step in steps:
            step()

    return launch


def _register(op: str) -> None:
    @kernel(scenario=op, backend="numba", variant="fused", device="cuda")
    def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
        return fused_entry(op, inputs, out, params, opts)

    @kernel(scenario=op, backend="numba", variant="unfused", device="cuda")
    def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
        return unfused_entry(op, inputs, out, params, opts)


for _op in DECOMPOSITIONS:
    _register(_op)
