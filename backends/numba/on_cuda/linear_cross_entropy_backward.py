"""Linear cross-entropy's backward and training step on CUDA with Numba (the same kernels run in the simulator):
the matmul family's tiled kernel for every GEMM (numba-cuda has no BLAS; tile `TILE` = 32³ as the forward
module), a block per token for the row kernels; the chunked backward (fused) against the one over every token
(unfused), the algorithm of `backends.numba.on_cpu.linear_cross_entropy_backward`.

Fused forward: the forward module's chunks (the chunk's GEMM into one chunk × vocab buffer, its row kernel, the
cross-entropy family's mean), its row kernel (`rows_lse`) writing each token's log-sum-exp beside the loss; it
keeps the inputs and that (4 bytes a token). Fused backward, per chunk of tokens: the chunk's logits again
(GEMM), g = exp(l − lse)·dy/counted with dy/counted off the target, in place (`grad_lse`), dhidden[chunk] =
g · Wᵀ into the output rows, and dweight's term hiddenᵀ[chunk] · g: into dweight itself for the first chunk,
into an H × V float32 scratch for the others (the tiled kernel stores its float32 accumulators there whatever
the inputs' dtype), which `add_into` adds to dweight, as the ledger counts. In a training step the forward does that per-chunk work itself,
right after each chunk's row kernel (the logits computed once, Liger's order), and the backward launches
nothing. Unfused forward: the GEMM into
every token's logits, the cross-entropy family's log-softmax in place, gather and mean; logp kept. Unfused
backward: g from logp (`grad_logp`) into a tokens × vocab buffer, then the two GEMMs over all of it.

Wᵀ and hiddenᵀ are strided views of the inputs (no copy; numba-cuda's own `.T` on a device array launches a
transpose into a new array), so those GEMM operands are read with a stride. Each gradient block counts the
batch's counted tokens itself (the mean's divisor: the targets stay in L2) rather than in a kernel of its own,
so the launches are the ledger's. Block reductions are the normalization family's shared-memory ones (the
simulator has no warp shuffles). Storage in the case's dtype, compute in float32.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from backends.numba import BACKEND, simulating, stream_arg
from backends.numba.on_cuda import matmul
from backends.numba.on_cuda.cross_entropy import _row_stats, prepared, threads_of
from backends.numba.on_cuda.linear_cross_entropy import TILE
from backends.numba.on_cuda.normalization_kernels import _reductions
from backends.numba.record import record_numba
from scenarios.cross_entropy import IGNORE_INDEX
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launcher
from suite.kit.launch_shape import block_chosen_by, launch_notes
from suite.kit.training import Pass, Written, training

try:
    from numba import cuda  # a module global, which the simulator swaps for its per-thread fake
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

ZERO = np.float32(0.0)
ADD_THREADS = 256


@functools.cache
def source(name: str, threads: int) -> Callable[..., None]:
    """A kernel as a Python function (what `cuda.jit` and `cuda.compile_ptx` take): rows_lse, grad_lse,
    grad_logp or add_into, for blocks of `threads`."""
    stats, block_sum = _row_stats(threads), _reductions()[0]

    def rows_lse(x, targets, losses, lse):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        row = cuda.blockIdx.x
        m, total = stats(x, row, smem)
        if cuda.threadIdx.x == 0:
            shift = m + math.log(total)
            lse[row] = shift
            target = targets[row]
            losses[row] = shift - np.float32(x[row, target]) if target != IGNORE_INDEX else ZERO

    def scale_of(all_targets, dy, smem):  # type: ignore[no-untyped-def]
        count = ZERO
        t = cuda.threadIdx.x
        while t < all_targets.size:
            if all_targets[t] != IGNORE_INDEX:
                count += np.float32(1.0)
            t += threads
        return np.float32(dy[0]) / block_sum(count, smem)

    def grad_row(x, g, target, shift, scale):  # type: ignore[no-untyped-def]
        row = cuda.blockIdx.x
        j = cuda.threadIdx.x
        while j < x.shape[1]:
            if target == IGNORE_INDEX:
                g[row, j] = ZERO
            else:
                v = math.exp(np.float32(x[row, j]) - shift) * scale
                g[row, j] = v - scale if j == target else v
            j += threads

    def grad_lse(x, g, all_targets, targets, lse, dy):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        scale = scale_of(all_targets, dy, smem)
        row = cuda.blockIdx.x
        grad_row(x, g, targets[row], lse[row], scale)

    def grad_logp(x, g, targets, dy):  # type: ignore[no-untyped-def]
        smem = cuda.shared.array(threads, np.float32)
        scale = scale_of(targets, dy, smem)
        grad_row(x, g, targets[cuda.blockIdx.x], ZERO, scale)

    def add_into(total, term):  # type: ignore[no-untyped-def]
        n = total.shape[1]
        idx = np.int64(cuda.blockIdx.x) * threads + cuda.threadIdx.x
        if idx < total.size:
            i, j = idx // n, idx % n
            total[i, j] = np.float32(total[i, j]) + term[i, j]

    scale_of, grad_row = cuda.jit(device=True)(scale_of), cuda.jit(device=True)(grad_row)
    kernels = {"rows_lse": rows_lse, "grad_lse": grad_lse, "grad_logp": grad_logp, "add_into": add_into}
    return kernels[name]


@functools.cache
def _dispatcher(name: str, threads: int) -> Any:
    """The `cuda.jit` dispatcher of a kernel (importable: the resource report rebuilds it)."""
    return cuda.jit(source(name, threads))


def _prepared(name: str, grid: int, threads: int, stream: Any, args: tuple) -> Launcher:
    """Compile (on a GPU) and record the kernel for these arrays now; the closure only launches."""
    dispatcher = _dispatcher(name, threads)
    compiled = None if simulating() else dispatcher.compile(tuple(numba.typeof(a) for a in args))
    factory = (__name__, "_dispatcher", (name, threads))
    record_numba(factory, args, threads, name=f"linear cross-entropy {name}", compiled=compiled)

    def launch() -> None:
        dispatcher[grid, threads, stream](*args)  # configured at each launch: the simulator keeps the last

    return launch


def _gemm(a: Any, b: Any, c: Any, stream: Any) -> Launcher:
    """c = a · b with the matmul family's tiled kernel (its epilogue off: the bias it is handed is never read)."""
    config = matmul.launch_config(a.shape[0], b.shape[1], list(TILE))
    bias = cuda.device_array(b.shape[1], dtype=a.dtype)
    factory = (matmul.__name__, "tiled_source", (*TILE, False))
    return matmul._prepare(factory, tuple(config["grid"]), tuple(config["threads"]), stream, a, b, bias, c)


def _transposed(a: Any) -> Any:
    """aᵀ as a strided view of a's memory."""
    if simulating():
        return a.T  # the simulator's arrays are NumPy's: a view
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    return DeviceNDArray(a.shape[::-1], a.strides[::-1], a.dtype, stream=a.stream, gpu_data=a.gpu_data)


def _checked(inputs: dict[str, Any], y: Any) -> tuple[Any, Any, Any]:
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    if str(y.dtype) not in ("float32", "float16") or h.dtype != y.dtype or w.dtype != y.dtype:
        raise ValueError(f"numba/cuda linear_cross_entropy: hidden {h.dtype}, weight {w.dtype} -> out {y.dtype}")
    return h, w, targets


def _pass(steps: list[Launcher], settings: dict, tokens: int, opts: dict, saved: dict | None = None) -> Pass:
    def run() -> None:
        for step in steps:
            step()

    by = block_chosen_by(BACKEND.option(opts, "block"))
    notes = launch_notes({**settings, "gemm_tile": list(TILE)}, (tokens,), by, kernels=len(steps))
    return Pass(run, saved if saved is not None else {}, notes)


def _chunk_gradient(
    i: int,
    a: int,
    b: int,
    h: Any,
    w: Any,
    targets: Any,
    lse: Any,
    dy: Any,
    grads: Any,
    logits: Any,
    term: Any,
    threads: int,
    stream: Any,
) -> list[Launcher]:
    """Chunk i's logits (tokens a..b−1, in `logits`) made its g in place, then dhidden's rows and dweight's term
    from it: into dweight for the first chunk, into the float32 scratch `term` added in for the others."""  # fmt: skip
    dh, dw = grads["dhidden"], grads["dweight"]
    g, xt = logits[: b - a], _transposed(h[a:b])
    steps = [
        _prepared("grad_lse", b - a, threads, stream, (g, g, targets, targets[a:b], lse[a:b], dy)),
        _gemm(g, _transposed(w), dh[a:b], stream),
    ]
    if i == 0:
        steps.append(_gemm(xt, g, dw, stream))
    else:
        steps.append(_gemm(xt, g, term, stream))
        steps.append(_prepared("add_into", -(-dw.size // ADD_THREADS), ADD_THREADS, stream, (dw, term)))
    return steps


def _scratch(grads: Any, spans: list[tuple[int, int]]) -> Any:
    """dweight's float32 scratch, past one chunk."""
    return cuda.device_array(grads["dweight"].shape, dtype=np.float32) if len(spans) > 1 else None


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """The chunked forward, its row kernel writing the log-sum-exp too; keeps the inputs and the lse. In a training
    step (`grads` handed) each chunk's logits become its gradient at once: g in place, dhidden's rows, dweight's
    term (Liger's order, three GEMMs a chunk); the backward is left nothing."""
    h, w, targets = _checked(inputs, y)
    tokens, vocab, chunk = h.shape[0], w.shape[1], int(params["chunk"])
    threads, stream = threads_of(opts), stream_arg(opts.get("stream"))
    logits = cuda.device_array((min(chunk, tokens), vocab), dtype=h.dtype)
    losses, lse = cuda.device_array(tokens, dtype=np.float32), cuda.device_array(tokens, dtype=np.float32)
    spans = chunks(tokens, chunk)
    term = _scratch(grads, spans) if grads is not None else None
    steps = []
    for i, (a, b) in enumerate(spans):
        part = logits[: b - a]
        steps.append(_gemm(h[a:b], w, part, stream))
        steps.append(_prepared("rows_lse", b - a, threads, stream, (part, targets[a:b], losses[a:b], lse[a:b])))
        if grads is not None:
            dy = inputs["dy"]
            steps.extend(_chunk_gradient(i, a, b, h, w, targets, lse, dy, grads, logits, term, threads, stream))
    steps.append(prepared("mean", 1, threads, stream, (losses, targets, y)))
    kept = {"hidden": h, "weight": w, "targets": targets, "logsumexp": lse}
    saved = kept if grads is None else Written(kept)
    return _pass(steps, {"threads": threads, "chunk": min(chunk, tokens)}, tokens, opts, saved)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Chunk by chunk: logits again, g in place, dhidden rows, dweight's term (added in past the first chunk): the
    backward phase has only the lse the forward kept, so each chunk's logits are computed twice across the two
    passes. In a training step the forward wrote both gradients and this launches nothing."""
    if isinstance(saved, Written):
        return Pass(lambda: None, notes={"gradients": "written by the forward, chunk by chunk"})
    h, w, targets, lse = saved["hidden"], saved["weight"], saved["targets"], saved["logsumexp"]
    tokens, vocab, chunk = h.shape[0], w.shape[1], int(params["chunk"])
    threads, stream = threads_of(opts), stream_arg(opts.get("stream"))
    spans = chunks(tokens, chunk)
    logits = cuda.device_array((min(chunk, tokens), vocab), dtype=h.dtype)
    term = _scratch(grads, spans)
    steps = []
    for i, (a, b) in enumerate(spans):
        steps.append(_gemm(h[a:b], w, logits[: b - a], stream))
        steps.extend(_chunk_gradient(i, a, b, h, w, targets, lse, inputs["dy"], grads, logits, term, threads, stream))
    return _pass(steps, {"threads": threads, "chunk": min(chunk, tokens), "chunks": len(spans)}, tokens, opts)


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """Every token's logits, the log-softmax in place over them (kept), the gather and the mean."""
    h, w, targets = _checked(inputs, y)
    tokens, vocab = h.shape[0], w.shape[1]
    threads, stream = threads_of(opts), stream_arg(opts.get("stream"))
    logp = cuda.device_array((tokens, vocab), dtype=h.dtype)
    losses = cuda.device_array(tokens, dtype=np.float32)
    steps = [
        _gemm(h, w, logp, stream),
        prepared("log_softmax", tokens, threads, stream, (logp, logp)),
        prepared("gather", -(-tokens // threads), threads, stream, (logp, targets, losses)),
        prepared("mean", 1, threads, stream, (losses, targets, y)),
    ]
    saved = {"hidden": h, "weight": w, "targets": targets, "logp": logp}
    return _pass(steps, {"threads": threads}, tokens, opts, saved)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """g for every token into a tokens × vocab buffer, then dhidden = g · Wᵀ and dweight = hiddenᵀ · g."""
    h, w, targets, logp = saved["hidden"], saved["weight"], saved["targets"], saved["logp"]
    dy, dh, dw = inputs["dy"], grads["dhidden"], grads["dweight"]
    threads, stream = threads_of(opts), stream_arg(opts.get("stream"))
    g = cuda.device_array(logp.shape, dtype=logp.dtype)
    steps = [
        _prepared("grad_logp", logp.shape[0], threads, stream, (logp, g, targets, dy)),
        _gemm(g, _transposed(w), dh, stream),
        _gemm(_transposed(h), g, dw, stream),
    ]
    return _pass(steps, {"threads": threads}, logp.shape[0], opts)


training(
    "linear_cross_entropy",
    backend="numba",
    device="cuda",
    like=lambda a: cuda.device_array_like(a),
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
