"""Linear cross-entropy on CUDA with Numba (the same kernels run in the simulator): the matmul family's tiled
kernel for the LM head's GEMM (numba-cuda has no BLAS), then the cross-entropy family's row and mean kernels
(`backends.numba.on_cuda.cross_entropy`), a block per token.

Unfused: one GEMM into the logits of every token, the row kernel over them, the mean. Fused: the GEMM and the
row kernel a chunk of tokens at a time over one chunk × vocab buffer, then the mean. The GEMM's tile is
`TILE` (BM, BN, BK) = 32³, its epilogue off (the bias it is handed is never read). Both variants run the same
kernels, so their comparison is the memory's; the GEMM itself is the matmul family's to judge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from backends.numba import BACKEND, stream_arg
from backends.numba.on_cuda import matmul
from backends.numba.on_cuda.cross_entropy import prepared, threads_of
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launch, kernel
from suite.kit.launch_shape import block_chosen_by, launch_notes

try:
    from numba import cuda
except ImportError:  # numba-cuda missing: the entries stay registered and the target's probe says why
    cuda = None

TILE = (32, 32, 32)


@kernel(scenario="linear_cross_entropy", backend="numba", variant=("fused", "unfused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`fused`: the logits `chunk` tokens at a time, each chunk's loss taken before the next GEMM overwrites it;
    `unfused`: all the tokens × vocab logits at once."""
    chunk = int(params["chunk"]) if variant == "fused" else int(inputs["hidden"].shape[0])
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    if str(out.dtype) not in ("float32", "float16") or h.dtype != out.dtype or w.dtype != out.dtype:
        raise ValueError(f"numba/cuda linear_cross_entropy: hidden {h.dtype}, weight {w.dtype} -> out {out.dtype}")
    tokens, vocab = h.shape[0], w.shape[1]
    threads, stream = threads_of(opts), stream_arg(opts.get("stream"))
    logits = cuda.device_array((min(chunk, tokens), vocab), dtype=h.dtype)
    losses = cuda.device_array(tokens, dtype=np.float32)
    bias = cuda.to_device(np.zeros(vocab, dtype=h.dtype))
    steps = []
    for a, b in chunks(tokens, chunk):
        part = logits[: b - a]
        config = matmul.launch_config(b - a, vocab, list(TILE))
        grid, block = tuple(config["grid"]), tuple(config["threads"])
        factory = (matmul.__name__, "tiled_source", (*TILE, False))
        steps.append(matmul._prepare(factory, grid, block, stream, h[a:b], w, bias, part))
        steps.append(prepared("rows", b - a, threads, stream, (part, targets[a:b], losses[a:b])))
    steps.append(prepared("mean", 1, threads, stream, (losses, targets, out)))

    def launch() -> None:
        for step in steps:
            step()

    by = block_chosen_by(BACKEND.option(opts, "block"))  # as threads_of: the option where set
    notes = launch_notes(
        {"threads": threads, "chunk": min(chunk, tokens), "gemm_tile": list(TILE)}, (tokens,), by, kernels=len(steps)
    )
    return Launch(launch, notes=notes)
