"""Linear cross-entropy with Triton's cross-entropy kernels: torch.matmul (cuBLAS on a GPU) for the LM head's GEMM,
as Liger's fused linear cross-entropy does, then the cross-entropy family's row and mean kernels
(`backends.triton.cross_entropy`).

Unfused: one GEMM into the logits of every token, the row kernel over them, the mean. Fused: the GEMM and the
row kernel a chunk of tokens at a time over one chunk × vocab buffer, then the mean. Every Triton launch is
compiled when the row is built (a no-op in the interpreter), so a call only launches.
"""

from __future__ import annotations

from typing import Any

import torch

from backends.triton import BACKEND
from backends.triton.cross_entropy import MEAN_BLOCK, _ce_rows, _mean
from backends.triton.launch import row_warps
from backends.triton.record import record_triton
from scenarios.linear_cross_entropy import chunks
from suite.core.registry import Launch, kernel
from suite.kit.launch import chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes


@kernel(scenario="linear_cross_entropy", backend="triton", variant=("fused", "unfused"))
def entry(inputs: dict[str, Any], out: Any, params: dict, opts: dict, *, variant: str) -> Launch:
    """`fused`: the logits `chunk` tokens at a time, each chunk's loss taken before the next GEMM overwrites it;
    `unfused`: all the tokens × vocab logits at once."""
    chunk = int(params["chunk"]) if variant == "fused" else int(inputs["hidden"].shape[0])
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    tokens, vocab = h.shape[0], w.shape[1]
    tile = chunk_columns(vocab, int(params["tile"]))
    warps = row_warps(tile, opts)
    logits = torch.empty(min(chunk, tokens), vocab, dtype=h.dtype, device=h.device)
    losses = torch.empty(tokens, dtype=torch.float32, device=h.device)
    steps = []
    for a, b in chunks(tokens, chunk):
        part = logits[: b - a]
        args = (part, targets[a:b], losses[a:b], vocab)
        record_triton(
            _ce_rows,
            args,
            {"TILE": tile},
            warps,
            compiled=_ce_rows.warmup(*args, num_warps=warps, grid=(b - a,), TILE=tile),
        )
        steps.append((h[a:b], part, args))
    mean_args = (losses, targets, out, tokens)
    _mean.warmup(*mean_args, num_warps=warps, grid=(1,), BLOCK=MEAN_BLOCK)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def launch() -> None:
        with on_stream():
            for x, part, args in steps:
                torch.matmul(x, w, out=part)
                _ce_rows[(part.shape[0],)](*args, num_warps=warps, TILE=tile)
            _mean[(1,)](*mean_args, num_warps=warps, BLOCK=MEAN_BLOCK)

    settings = {"tile": tile, "num_warps": warps, "chunk": min(chunk, tokens)}
    notes = launch_notes(settings, (tokens,), chosen_by(opts, ("num_warps",)), kernels=2 * len(steps) + 1)
    return Launch(launch, notes=notes)
