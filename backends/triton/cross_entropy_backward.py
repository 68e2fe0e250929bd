"""Cross-entropy's backward and training step in Triton: the gradient written by the forward's own row program
(fused, Liger-Kernel's approach) against a backward kernel reading the saved log-softmax (unfused).

dlogits = (softmax(x) − onehot(target))·dy/counted, zero on rows whose target is ignore_index; `counted` is the
number of tokens not ignored. No program can wait for another, so every row program counts the targets itself,
TILE at a time, before it scales its row: the targets (8 bytes a token) come from DRAM once and from L2 after,
which keeps the ledger's kernels (no counting kernel, no host-side sum) and costs a row a few loads of L2.

Fused forward: one program per token; an ignored row writes zeros and a zero loss without reading its logits;
any other takes the row's online max and sum (`_row_stats`, the forward's), writes its loss, then walks the row
again while it sits in L2 writing (exp(x − max)/sum − onehot)·dy/counted; the forward's mean kernel follows.
It saves only the gradient. In a training step (`grads` handed) the gradient's buffer is the output's own and
the backward launches nothing; in the backward phase the backward copies the saved gradient into the output.
Unfused forward: the forward module's log-softmax, gather and mean kernels, logp kept with the targets; its
backward is one program per token writing (exp(logp) − onehot)·dy/counted. float32 and float16 storage, float32
arithmetic; 64-bit offsets; num_warps follows TILE (`row_warps`) for row kernels.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.cross_entropy import (
    IGNORE,
    MEAN_BLOCK,
    _gather,
    _log_softmax,
    _mean,
    _row_stats,
    launcher,
)
from backends.triton.launch import row_warps
from backends.triton.record import record_triton
from suite.kit.launch import chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes
from suite.kit.training import Pass, training

COPY_BLOCK = 1024
"""Elements a copy program moves: 8 a thread over its 4 warps."""
COPY_WARPS = 4


@triton.jit
def _counted(t_ptr, tokens, BLOCK: tl.constexpr):
    """The number of targets that are not ignore_index, as float32, BLOCK targets at a time."""
    offs = tl.arange(0, BLOCK)
    count = tl.zeros([BLOCK], tl.int32)
    for start in range(0, tokens, BLOCK):
        target = tl.load(t_ptr + start + offs, mask=start + offs < tokens, other=IGNORE)
        count += (target != IGNORE).to(tl.int32)
    return tl.sum(count, axis=0).to(tl.float32)


@triton.jit
def _zero_row(g_ptr, row, vocab, TILE: tl.constexpr):
    offs = tl.arange(0, TILE)
    zeros = tl.zeros([TILE], tl.float32).to(g_ptr.dtype.element_ty)
    for start in range(0, vocab, TILE):
        tl.store(g_ptr + row * vocab + start + offs, zeros, mask=start + offs < vocab)


@triton.jit
def _ce_rows_grad(x_ptr, t_ptr, dy_ptr, loss_ptr, g_ptr, tokens, vocab, TILE: tl.constexpr):
    """Loss of the token and the gradient of its row, the logits read from memory once."""
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(t_ptr + row)
    if target == IGNORE:
        tl.store(loss_ptr + row, 0.0)
        _zero_row(g_ptr, row, vocab, TILE)
    else:
        scale = tl.load(dy_ptr).to(tl.float32) / _counted(t_ptr, tokens, TILE)
        m, total = _row_stats(x_ptr, row, vocab, TILE)
        picked = tl.load(x_ptr + row * vocab + target).to(tl.float32)
        tl.store(loss_ptr + row, m + tl.log(total) - picked)
        inv = 1.0 / total
        offs = tl.arange(0, TILE)
        for start in range(0, vocab, TILE):
            cols = start + offs
            mask = cols < vocab
            v = tl.load(x_ptr + row * vocab + cols, mask=mask, other=0.0).to(tl.float32)
            p = tl.exp(v - m) * inv - tl.where(cols == target, 1.0, 0.0)
            tl.store(g_ptr + row * vocab + cols, (p * scale).to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _logp_backward(logp_ptr, t_ptr, dy_ptr, g_ptr, tokens, vocab, TILE: tl.constexpr):
    """dlogits of a row from its saved logp; an ignored row's logp is not read."""
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(t_ptr + row)
    if target == IGNORE:
        _zero_row(g_ptr, row, vocab, TILE)
    else:
        scale = tl.load(dy_ptr).to(tl.float32) / _counted(t_ptr, tokens, TILE)
        offs = tl.arange(0, TILE)
        for start in range(0, vocab, TILE):
            cols = start + offs
            mask = cols < vocab
            lp = tl.load(logp_ptr + row * vocab + cols, mask=mask, other=0.0).to(tl.float32)
            p = tl.exp(lp) - tl.where(cols == target, 1.0, 0.0)
            tl.store(g_ptr + row * vocab + cols, (p * scale).to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _checked(inputs: dict[str, Any], y: Any) -> tuple[Any, Any, Any]:
    x, targets, dy = inputs["logits"], inputs["targets"], inputs["dy"]
    if x.dtype != y.dtype or dy.dtype != y.dtype or targets.dtype != torch.int64:
        raise ValueError(
            f"triton cross_entropy training: logits {x.dtype}, dy {dy.dtype}, targets {targets.dtype} -> "
            f"{y.dtype}; needs logits, dy and out of one dtype, int64 targets"
        )
    return x, targets, dy


def _one(fn: Any, grid: tuple[int, ...], args: tuple, const: dict, warps: int, opts: dict, settings: dict) -> Pass:
    """A backward of one kernel: compiled now (a no-op in the interpreter) and recorded, launched on the stream."""
    compiled = fn.warmup(*args, num_warps=warps, grid=grid, **const)
    record_triton(fn, args, const, warps, compiled=compiled)
    context = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with context():
            fn[grid](*args, num_warps=warps, **const)

    by = chosen_by(opts, ("num_warps",))
    return Pass(run, notes=launch_notes({**settings, "num_warps": warps}, grid, by, kernels=1))


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """Loss and gradient in one program per row, then the mean; saves the gradient only. In a training step
    (`grads` handed) the gradient goes straight into its output buffer."""
    x, targets, dy = _checked(inputs, y)
    (tokens, vocab), tile = x.shape, chunk_columns(x.shape[1], int(params["tile"]))
    losses = torch.empty(tokens, dtype=torch.float32, device=x.device)
    dlogits = grads["dlogits"] if grads is not None else torch.empty_like(x)
    launch = launcher(
        [
            (_ce_rows_grad, (tokens,), (x, targets, dy, losses, dlogits, tokens, vocab), {"TILE": tile}),
            (_mean, (1,), (losses, targets, y, tokens), {"BLOCK": MEAN_BLOCK}),
        ],
        tile,
        opts,
    )
    return Pass(launch.run, {"dlogits": dlogits}, launch.notes)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Nothing left to compute. In a training step the forward wrote the gradient into its output buffer and this
    launches nothing; in the backward phase, one copy kernel from the saved gradient into the output."""
    src, dst = saved["dlogits"], grads["dlogits"]
    if src is dst:
        return Pass(lambda: None, notes={"dlogits": "written by the forward's row pass"})
    grid = (triton.cdiv(src.numel(), COPY_BLOCK),)
    copy = _one(_copy, grid, (src, dst, src.numel()), {"BLOCK": COPY_BLOCK}, COPY_WARPS, opts, {})
    return Pass(copy.run, notes={**copy.notes, "dlogits": "copied from the forward's saved gradient"})


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """log-softmax into logp (kept), gather −logp[target], mean: the forward module's unfused kernels."""
    x, targets, _ = _checked(inputs, y)
    (tokens, vocab), tile = x.shape, chunk_columns(x.shape[1], int(params["tile"]))
    logp, losses = torch.empty_like(x), torch.empty(tokens, dtype=torch.float32, device=x.device)
    launch = launcher(
        [
            (_log_softmax, (tokens,), (x, logp, vocab), {"TILE": tile}),
            (
                _gather,
                (triton.cdiv(tokens, MEAN_BLOCK),),
                (logp, targets, losses, tokens, vocab),
                {"BLOCK": MEAN_BLOCK},
            ),
            (_mean, (1,), (losses, targets, y, tokens), {"BLOCK": MEAN_BLOCK}),
        ],
        tile,
        opts,
    )
    return Pass(launch.run, {"logp": logp, "targets": targets}, launch.notes)


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """One program per row reading logp (and the targets, dy), writing dlogits."""
    logp, targets, dy, out = saved["logp"], saved["targets"], inputs["dy"], grads["dlogits"]
    (tokens, vocab), tile = logp.shape, chunk_columns(logp.shape[1], int(params["tile"]))
    args = (logp, targets, dy, out, tokens, vocab)
    return _one(_logp_backward, (tokens,), args, {"TILE": tile}, row_warps(tile, opts), opts, {"tile": tile})


training(
    "cross_entropy",
    backend="triton",
    device="cuda",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
