"""Where fused linear cross-entropy's training step spends its time on the CPU: the step, its parts alone, and the
same GEMMs over every token at once in NumPy's and torch's BLAS.

The step (Numba CPU, `fused`, train phase) runs, per chunk of 256 tokens, three GEMMs (the logits; dhidden's rows;
dweight's term) and its row kernels (the loss and log-sum-exp, the gradient in place, dweight's accumulation).
torch.compile's step runs the same three GEMMs once over all 2,048 tokens. Timing the parts apart says which of
the two costs the difference: the chunked GEMMs against the whole-batch ones, or the kernels between them; the
chunked and the whole-batch GEMMs in both BLAS libraries say how much of the GEMMs' gap is the chunking and how
much the library.

    nox -s benchmark -- tests/benchmarks/bench_lce_parts.py --benchmark-group-by=group

The shape is the train_linear_cross_entropy experiment's (2,048 tokens, hidden 256, vocab 32,000, chunk 256,
float32). Each benchmark is a plain pytest-benchmark loop; compare the medians of one run, on a quiet host.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from backends.numba.on_cpu import linear_cross_entropy_backward as lce
from backends.numba.on_cpu.arrays import per_thread
from backends.numba.on_cpu.cross_entropy import compiled
from scenarios.linear_cross_entropy import chunks

TOKENS, HIDDEN, VOCAB, CHUNK, TILE = 2048, 256, 32000, 256, 2048
GROUP = "linear_cross_entropy train, 2,048 tokens × 256 → 32,000, chunk 256, float32"


def _parts() -> dict[str, Callable[[], None]]:
    rng = np.random.default_rng(20261205)
    h = rng.standard_normal((TOKENS, HIDDEN), dtype=np.float32)
    w = rng.standard_normal((HIDDEN, VOCAB), dtype=np.float32) * np.float32(0.05)
    targets = rng.integers(0, VOCAB, TOKENS).astype(np.int64)
    inputs = {"hidden": h, "weight": w, "targets": targets, "dy": np.ones(1, np.float32)}
    grads = {"dhidden": np.empty_like(h), "dweight": np.empty_like(w)}
    step = lce.fused_forward(inputs, np.empty(1, np.float32), {"chunk": CHUNK, "tile": TILE}, {}, grads).run

    spans = chunks(TOKENS, CHUNK)
    logits, term, dw, dh = (np.empty((CHUNK, VOCAB), np.float32), np.empty_like(w), np.empty_like(w), np.empty_like(h))

    def chunk_gemms() -> None:
        for a, b in spans:
            np.matmul(h[a:b], w, out=logits)
            np.matmul(logits, w.T, out=dh[a:b])
            np.matmul(h[a:b].T, logits, out=term)

    np.matmul(h[:CHUNK], w, out=logits)
    lse, losses, scratch = np.zeros(TOKENS, np.float32), np.empty(TOKENS, np.float32), per_thread(TILE)
    rows = compiled(lce.rows_with_lse, logits, targets, losses, lse, TILE, scratch)
    grad = compiled(lce.chunk_grad, logits, targets, lse, 1.0)
    add = compiled(lce.add_into, dw, term)

    def row_kernels() -> None:
        for i, (a, b) in enumerate(spans):
            rows(logits, targets[a:b], losses[a:b], lse[a:b], TILE, scratch)
            grad(logits, targets[a:b], lse[a:b], 1.0 / TOKENS)
            if i:
                add(dw, term)

    every = np.empty((TOKENS, VOCAB), np.float32)

    def whole_gemms_numpy() -> None:
        np.matmul(h, w, out=every)
        np.matmul(every, w.T, out=dh)
        np.matmul(h.T, every, out=term)

    parts = {"step": step, "chunk_gemms_numpy": chunk_gemms, "row_kernels": row_kernels}
    parts["whole_gemms_numpy"] = whole_gemms_numpy
    try:
        import torch
    except ImportError:
        return parts
    th, tw, tevery, tdh, tterm, tlogits = (torch.from_numpy(a) for a in (h, w, every, dh, term, logits))

    def chunk_gemms_torch() -> None:
        for a, b in spans:
            torch.matmul(th[a:b], tw, out=tlogits)
            torch.matmul(tlogits, tw.T, out=tdh[a:b])
            torch.matmul(th[a:b].T, tlogits, out=tterm)

    def whole_gemms_torch() -> None:
        torch.matmul(th, tw, out=tevery)
        torch.matmul(tevery, tw.T, out=tdh)
        torch.matmul(th.T, tevery, out=tterm)

    parts["whole_gemms_torch"] = whole_gemms_torch
    parts["chunk_gemms_torch"] = chunk_gemms_torch
    return parts


PARTS = ("step", "chunk_gemms_numpy", "row_kernels", "whole_gemms_numpy", "whole_gemms_torch", "chunk_gemms_torch")


@pytest.fixture(scope="module")
def parts() -> dict[str, Callable[[], None]]:
    return _parts()


@pytest.mark.parametrize("part", PARTS)
def test_part(benchmark, parts, part: str) -> None:
    if part not in parts:
        pytest.skip("torch is not installed")
    benchmark.group = GROUP
    parts[part]()  # warm: compiled, touched
    benchmark.pedantic(parts[part], rounds=7, warmup_rounds=1, iterations=1)
