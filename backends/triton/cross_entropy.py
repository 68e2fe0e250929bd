"""Cross-entropy in Triton: one program per token fused (online max and sum over TILE-column blocks, the
target's logit picked on the way), against log-softmax, gather and mean as separate kernels.

Both end in the same mean kernel: one program sums the float32 losses and counts the counted tokens in blocks
of 1024, then divides. The log-softmax kernel walks its row twice (statistics, then logp): the second walk finds
the row in L2 on a GPU, and the ledger counts it once. Offsets are 64-bit; num_warps follows TILE
(`backends.triton.launch.row_warps`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.launch import row_warps
from backends.triton.record import record_triton
from scenarios.cross_entropy import IGNORE_INDEX
from suite.core.registry import Launch, Launcher, kernel
from suite.kit.launch import chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes

IGNORE: tl.constexpr = tl.constexpr(IGNORE_INDEX)
MEAN_BLOCK = 1024


@triton.jit
def _row_stats(x_ptr, row, vocab, TILE: tl.constexpr):
    """(max, Σ exp(x − max)) of a row, online over blocks of TILE columns."""
    offs = tl.arange(0, TILE)
    m = tl.max(tl.full([TILE], -float("inf"), tl.float32), axis=0)
    total = tl.sum(tl.zeros([TILE], tl.float32), axis=0)
    for start in range(0, vocab, TILE):
        v = tl.load(x_ptr + row * vocab + start + offs, mask=start + offs < vocab, other=-float("inf"))
        v = v.to(tl.float32)
        m_new = tl.maximum(m, tl.max(v, axis=0))
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
        m = m_new
    return m, total


@triton.jit
def _ce_rows(x_ptr, t_ptr, loss_ptr, vocab, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m, total = _row_stats(x_ptr, row, vocab, TILE)
    target = tl.load(t_ptr + row)
    picked = tl.load(x_ptr + row * vocab + tl.maximum(target, 0)).to(tl.float32)
    loss = m + tl.log(total) - picked
    tl.store(loss_ptr + row, tl.where(target == IGNORE, 0.0, loss))


@triton.jit
def _log_softmax(x_ptr, logp_ptr, vocab, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m, total = _row_stats(x_ptr, row, vocab, TILE)
    shift = m + tl.log(total)
    offs = tl.arange(0, TILE)
    for start in range(0, vocab, TILE):
        mask = start + offs < vocab
        v = tl.load(x_ptr + row * vocab + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(logp_ptr + row * vocab + start + offs, (v - shift).to(logp_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gather(logp_ptr, t_ptr, loss_ptr, tokens, vocab, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < tokens
    target = tl.load(t_ptr + rows, mask=mask, other=IGNORE)
    keep = mask & (target != IGNORE)
    picked = tl.load(logp_ptr + rows * vocab + tl.maximum(target, 0), mask=keep, other=0.0).to(tl.float32)
    tl.store(loss_ptr + rows, -picked, mask=mask)


@triton.jit
def _mean(loss_ptr, t_ptr, out_ptr, tokens, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, tokens, BLOCK):
        mask = start + offs < tokens
        target = tl.load(t_ptr + start + offs, mask=mask, other=IGNORE)
        keep = target != IGNORE
        total += tl.where(keep, tl.load(loss_ptr + start + offs, mask=mask, other=0.0), 0.0)
        count += keep.to(tl.float32)
    tl.store(out_ptr, (tl.sum(total, axis=0) / tl.sum(count, axis=0)).to(out_ptr.dtype.element_ty))


Step = tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any]]


def launcher(launches: list[Step], tile: int, opts: dict) -> Launcher:
    """Compile every launch now (a no-op in the interpreter) and return a closure that only launches."""
    warps = row_warps(tile, opts)
    context: Callable[[], contextlib.AbstractContextManager] = BACKEND.launch_stream(opts.get("stream"))
    for fn, grid, args, const in launches:
        compiled = fn.warmup(*args, num_warps=warps, grid=grid, **const)
        record_triton(fn, args, const, warps, compiled=compiled)

    def launch() -> None:
        with context():
            for fn, grid, args, const in launches:
                fn[grid](*args, num_warps=warps, **const)

    settings = {"tile": tile, "num_warps": warps}
    notes = launch_notes(settings, launches[0][1], chosen_by(opts, ("num_warps",)), kernels=len(launches))
    return Launch(launch, notes=notes)


def fused_launches(x: Any, targets: Any, losses: Any, out: Any, tile: int) -> list[Step]:
    """The fused row kernel and the mean, for logits x (tokens × vocab) into out[0]."""
    tokens, vocab = x.shape
    return [
        (_ce_rows, (tokens,), (x, targets, losses, vocab), {"TILE": tile}),
        (_mean, (1,), (losses, targets, out, tokens), {"BLOCK": MEAN_BLOCK}),
    ]


@kernel(scenario="cross_entropy", backend="triton", variant="fused", device="cuda")
def fused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    x, targets = inputs["logits"], inputs["targets"]
    tile = chunk_columns(x.shape[1], int(params["tile"]))
    losses = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    return launcher(fused_launches(x, targets, losses, out, tile), tile, opts)


@kernel(scenario="cross_entropy", backend="triton", variant="unfused", device="cuda")
def unfused(inputs: dict[str, Any], out: Any, params: dict, opts: dict) -> Launcher:
    x, targets = inputs["logits"], inputs["targets"]
    (tokens, vocab), tile = x.shape, chunk_columns(x.shape[1], int(params["tile"]))
    logp, losses = torch.empty_like(x), torch.empty(tokens, dtype=torch.float32, device=x.device)
    launches = [
        (_log_softmax, (tokens,), (x, logp, vocab), {"TILE": tile}),
        (_gather, (triton.cdiv(tokens, MEAN_BLOCK),), (logp, targets, losses, tokens, vocab), {"BLOCK": MEAN_BLOCK}),
        (_mean, (1,), (losses, targets, out, tokens), {"BLOCK": MEAN_BLOCK}),
    ]
    return launcher(launches, tile, opts)
