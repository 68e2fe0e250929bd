"""Linear cross-entropy on the host CPU: NumPy's BLAS for the LM head's GEMM, the cross-entropy family's Numba
row and mean kernels for the loss (`backends.numba.on_cpu.cross_entropy`).

Unfused: one GEMM into the logits of every token, the row kernel over them, the mean. Fused: the GEMM and the
row kernel a chunk of tokens at a time over one chunk × vocab buffer (`np.matmul(..., out=)` into a view of it),
then the mean. float32 only: NumPy has no half-precision BLAS (its float16 matmul is a scalar loop, which would
time NumPy rather than the fusion), so float16 cases are `Unsupported`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.numba.on_cpu.arrays import per_thread
from backends.numba.on_cpu.cross_entropy import compiled, fused_rows, mean_kernel
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launcher, Unsupported, kernel


def _arrays(inputs: dict[str, Any], out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    if out.dtype != np.float32:
        raise Unsupported(f"{out.dtype}: NumPy has no half-precision BLAS for the LM head's GEMM")
    if h.dtype != np.float32 or w.dtype != np.float32 or targets.dtype != np.int64:
        raise ValueError(
            f"numba/cpu linear_cross_entropy: hidden {h.dtype}, weight {w.dtype}, targets "
            f"{targets.dtype} -> out {out.dtype}; needs float32 and int64 targets"
        )
    return h, w, targets


def _launcher(inputs: dict[str, Any], out: np.ndarray, params: dict, chunk: int) -> Launcher:
    """The GEMM and the row kernel over spans of `chunk` tokens into one chunk × vocab buffer, then the mean."""
    h, w, targets = _arrays(inputs, out)
    tokens, vocab = h.shape[0], w.shape[1]
    tile = min(int(params["tile"]), vocab)
    logits = np.empty((min(chunk, tokens), vocab), np.float32)
    losses, scratch = np.empty(tokens, np.float32), per_thread(tile)
    rows = compiled(fused_rows("float32"), logits, targets, losses, tile, scratch)
    mean = compiled(mean_kernel("float32"), losses, targets, out)
    spans = [(h[a:b], logits[: b - a], targets[a:b], losses[a:b]) for a, b in chunks(tokens, chunk)]

    def launch() -> None:
        for x, part, t, loss in spans:
            np.matmul(x, w, out=part)
            rows(part, t, loss, tile, scratch)
        mean(losses, targets, out)

    return launch


@kernel(scenario="linear_cross_entropy", backend="numba", variant="fused", device="cpu")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """A chunk's logits at a time: the GEMM into one chunk × vocab buffer, the row kernel reading it."""
    return _launcher(inputs, out, params, int(params["chunk"]))


@kernel(scenario="linear_cross_entropy", backend="numba", variant="unfused", device="cpu")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    """Every token's logits at once: one GEMM, then the row kernel over all of them."""
    return _launcher(inputs, out, params, int(inputs["hidden"].shape[0]))
