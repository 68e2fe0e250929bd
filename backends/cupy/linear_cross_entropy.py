"""Linear cross-entropy in CuPy: cuBLAS (`cupy.matmul`) for the LM head's GEMM, then the cross-entropy family's
CUDA C row and mean kernels (`backends.cupy.cross_entropy`), a block per token.

Unfused: one GEMM into the logits of every token, the row kernel over them, the mean. Fused: the GEMM and the
row kernel a chunk of tokens at a time over one chunk × vocab buffer, then the mean. Without a GPU the row and
mean kernels compile for sm_90 and the GEMM cannot run (nothing of cuBLAS is built ahead of time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.cupy import BACKEND, TARGET
from backends.cupy.build import build
from backends.cupy.cross_entropy import source
from backends.cupy.matmul import _cublas
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launch, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes


@kernel(scenario="linear_cross_entropy", backend="cupy", variant=("fused", "unfused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`fused`: the logits `chunk` tokens at a time, each chunk's loss taken before the next GEMM overwrites it;
    `unfused`: all the tokens × vocab logits at once."""
    chunk = int(params["chunk"]) if variant == "fused" else int(inputs["hidden"].shape[0])
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    (tokens, vocab), dtype = (h.shape[0], w.shape[1]), np.dtype(out.dtype).name
    threads = int(BACKEND.option(opts, "block") or 256)
    logits = TARGET.empty((min(chunk, tokens), vocab), dtype)
    losses = TARGET.empty((tokens,), "float32")
    rows, mean = (build(*source(name, dtype), threads=threads) for name in ("rows", "mean"))
    steps = []
    for a, b in chunks(tokens, chunk):
        part = logits[: b - a]
        steps.append((_cublas(h[a:b], w, part), b - a, (part, targets[a:b], losses[a:b], np.int64(vocab))))
    mean_args = (losses, targets, out, np.int64(tokens))
    context = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with context():
            for gemm, n, args in steps:
                gemm()
                rows((n,), (threads,), args)
            mean((1,), (threads,), mean_args)

    by = block_chosen_by(BACKEND.option(opts, "block"))
    notes = launch_notes({"threads": threads, "chunk": min(chunk, tokens)}, (tokens,), by, kernels=2 * len(steps) + 1)
    return Launch(launch, notes=notes)
