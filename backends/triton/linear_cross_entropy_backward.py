"""Linear cross-entropy's backward and training step in Triton: torch.matmul (cuBLAS on a GPU) for every GEMM, as
the forward module, Triton for the row kernels; the chunked backward (fused) against the one over every token
(unfused), the algorithm of `backends.numba.on_cpu.linear_cross_entropy_backward`.

Fused forward: the forward module's chunks (a chunk's GEMM into one chunk × vocab buffer, its row kernel, then
the mean), its row kernel (`_rows_lse`) writing each token's log-sum-exp beside the loss; it keeps the inputs and
that (4 bytes a token). Fused backward, per chunk of tokens: the chunk's logits again (GEMM), g = exp(l − lse)·
dy/counted with dy/counted off the target, in place in the same buffer (`_grad_rows`), dhidden[chunk] = g · Wᵀ
straight into the output rows, and dweight's term hiddenᵀ[chunk] · g: into dweight itself for the first chunk,
into an H × V float32 scratch for the others, which `_add_into` adds to dweight (as the ledger counts it: the
model's GEMMs write, they do not accumulate). No more than chunk × vocab of logits or gradient ever exists.
In a training step the forward does that per-chunk work itself, right after each chunk's row kernel (the
logits computed once, Liger's order), and the backward launches nothing.
Unfused forward: the GEMM into every token's logits, the cross-entropy family's log-softmax in place over them,
its gather and mean; logp kept. Unfused backward: g for every token from logp into a tokens × vocab buffer (the
same row kernel, lse off), then the two GEMMs over all of it.

The row kernel needs the batch's count of counted tokens (the mean's divisor); each program counts the targets
itself, a few targets a thread at a step (T·8 bytes, L2-resident after the first program) rather than a kernel of its own, so
the launches are the ledger's. Storage in the case's dtype, compute in float32. The float32 scratch of a
float16 case is written by cuBLAS's mixed GEMM (`torch.mm(..., out_dtype=float32)`, CUDA only); on the
interpreter's CPU tensors the operands are widened first, which gives the same sums.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from backends.triton import BACKEND
from backends.triton.cross_entropy import IGNORE, MEAN_BLOCK, _gather, _log_softmax, _mean, _row_stats
from backends.triton.launch import row_warps
from backends.triton.record import record_triton
from scenarios.linear_cross_entropy import chunks
from suite.kit.launch import chunk_columns
from suite.kit.launch_shape import chosen_by, launch_notes
from suite.kit.training import Pass, Written, training

ADD_BLOCK, ADD_WARPS = 1024, 4
"""dweight's add: the elementwise tutorial's block and warps, 8 elements a thread."""
COUNT_ITEMS = 4
"""Targets a thread loads per step of a gradient program's count (the block is 32·num_warps·COUNT_ITEMS)."""


@triton.jit
def _rows_lse(x_ptr, t_ptr, loss_ptr, lse_ptr, vocab, TILE: tl.constexpr):
    """The forward's fused row kernel, also writing the token's log-sum-exp (every token: it is finite)."""
    row = tl.program_id(0).to(tl.int64)
    m, total = _row_stats(x_ptr, row, vocab, TILE)
    shift = m + tl.log(total)
    tl.store(lse_ptr + row, shift)
    target = tl.load(t_ptr + row)
    picked = tl.load(x_ptr + row * vocab + tl.maximum(target, 0)).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(target == IGNORE, 0.0, shift - picked))


@triton.jit
def _grad_rows(
    x_ptr,
    g_ptr,
    all_t_ptr,
    t_ptr,
    lse_ptr,
    dy_ptr,
    tokens,
    vocab,
    HAS_LSE: tl.constexpr,
    TILE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """g = (exp(x − lse) − onehot(target))·dy/counted for one row (x the logits, or logp with lse off), zeros on
    an ignored row (x not read there). x and g may be one buffer: each element is read before it is written."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, tokens, BLOCK):
        t = tl.load(all_t_ptr + start + offs, mask=start + offs < tokens, other=IGNORE)
        count += (t != IGNORE).to(tl.float32)
    scale = tl.load(dy_ptr).to(tl.float32) / tl.sum(count, axis=0)
    target = tl.load(t_ptr + row)
    keep = target != IGNORE
    shift = 0.0
    if HAS_LSE:
        shift = tl.load(lse_ptr + row)
    cols = tl.arange(0, TILE)
    for start in range(0, vocab, TILE):
        j = start + cols
        read = (j < vocab) & (tl.full([TILE], 0, tl.int64) + target != IGNORE)
        v = tl.load(x_ptr + row * vocab + j, mask=read, other=0.0).to(tl.float32)
        g = tl.exp(v - shift) * scale - tl.where(j == target, scale, 0.0)
        g = tl.where(keep, g, 0.0)
        tl.store(g_ptr + row * vocab + j, g.to(g_ptr.dtype.element_ty), mask=j < vocab)


@triton.jit
def _add_into(total_ptr, term_ptr, n, BLOCK: tl.constexpr):
    """total += term (term float32), in float32, stored in total's dtype."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(total_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    term = tl.load(term_ptr + offs, mask=mask, other=0.0)
    tl.store(total_ptr + offs, (total + term).to(total_ptr.dtype.element_ty), mask=mask)


def _steps(launches: list[tuple], warps: int) -> list[tuple]:
    """Compile every Triton launch (fn, grid, args, constexprs[, its own num_warps], else `warps`) now (a no-op in
    the interpreter) and record it for the resource report."""
    steps = []
    for fn, grid, args, const, *own in launches:
        n = own[0] if own else warps
        record_triton(fn, args, const, n, compiled=fn.warmup(*args, num_warps=n, grid=grid, **const))
        steps.append((fn, grid, args, const, n))
    return steps


def _run(launch: tuple) -> None:
    fn, grid, args, const, warps = launch
    fn[grid](*args, num_warps=warps, **const)


def _gemm_float32(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out (float32) = a · b with float32 accumulation, whatever a's and b's dtype."""
    if a.dtype == out.dtype:
        torch.matmul(a, b, out=out)
    elif out.is_cuda:
        torch.mm(a, b, out_dtype=out.dtype, out=out)
    else:  # CPU torch has no mixed-dtype mm
        torch.matmul(a.to(out.dtype), b.to(out.dtype), out=out)


def _settings(vocab: int, params: dict, opts: dict) -> tuple[int, int]:
    tile = chunk_columns(vocab, int(params["tile"]))
    return tile, row_warps(tile, opts)


def _notes(tile: int, warps: int, tokens: int, opts: dict, kernels: int, **extra: Any) -> dict:
    settings = {"tile": tile, "num_warps": warps, **extra}
    return launch_notes(settings, (tokens,), chosen_by(opts, ("num_warps",)), kernels=kernels)


def _gradient_steps(
    h: torch.Tensor,
    w: torch.Tensor,
    targets: torch.Tensor,
    lse: torch.Tensor,
    dy: torch.Tensor,
    grads: Any,
    logits: torch.Tensor,
    tile: int,
    warps: int,
) -> tuple[list[tuple], Any]:
    """(per-chunk work, step): `step(*work[i])` turns chunk i's logits (in `logits`) into its g in place and writes
    dhidden's rows and dweight's term from it (into dweight for the first chunk, through the float32 scratch
    added in for the others)."""  # fmt: skip
    dh, dw = grads["dhidden"], grads["dweight"]
    tokens, vocab = h.shape[0], w.shape[1]
    spans = chunks(tokens, logits.shape[0])
    term = torch.empty(dw.shape, dtype=torch.float32, device=dw.device) if len(spans) > 1 else None
    const = {"HAS_LSE": True, "TILE": tile, "BLOCK": 32 * warps * COUNT_ITEMS}
    work = []
    for i, (a, b) in enumerate(spans):
        g = logits[: b - a]
        grad_args = (g, g, targets, targets[a:b], lse[a:b], dy, tokens, vocab)
        launches = [(_grad_rows, (b - a,), grad_args, const)]
        if i:
            add_args = (dw, term, dw.numel())
            grid = (triton.cdiv(dw.numel(), ADD_BLOCK),)
            launches.append((_add_into, grid, add_args, {"BLOCK": ADD_BLOCK}, ADD_WARPS))
        work.append((i, h[a:b], g, dh[a:b], _steps(launches, warps)))

    def step(i: int, x: torch.Tensor, g: torch.Tensor, rows: torch.Tensor, launches: list[tuple]) -> None:
        _run(launches[0])
        torch.matmul(g, w.T, out=rows)
        if i == 0:
            torch.matmul(x.T, g, out=dw)
        else:
            _gemm_float32(x.T, g, term)
            _run(launches[1])

    return work, step


def fused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict, grads: Any = None) -> Pass:
    """The chunked forward, its row kernel writing the log-sum-exp too; keeps the inputs and the lse. In a training
    step (`grads` handed) each chunk's logits become its gradient at once: g in place, dhidden's rows, dweight's
    term (Liger's order, three GEMMs a chunk); the backward is left nothing."""
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    tokens, vocab, chunk = h.shape[0], w.shape[1], int(params["chunk"])
    tile, warps = _settings(vocab, params, opts)
    logits = torch.empty(min(chunk, tokens), vocab, dtype=h.dtype, device=h.device)
    losses = torch.empty(tokens, dtype=torch.float32, device=h.device)
    lse = torch.empty(tokens, dtype=torch.float32, device=h.device)
    steps = []
    for a, b in chunks(tokens, chunk):
        part = logits[: b - a]
        rows = (_rows_lse, (b - a,), (part, targets[a:b], losses[a:b], lse[a:b], vocab), {"TILE": tile})
        steps.append((h[a:b], part, *_steps([rows], warps)))
    mean = _steps([(_mean, (1,), (losses, targets, y, tokens), {"BLOCK": MEAN_BLOCK})], warps)[0]
    on_stream = BACKEND.launch_stream(opts.get("stream"))
    kept = {"hidden": h, "weight": w, "targets": targets, "logsumexp": lse}
    work, step = (
        _gradient_steps(h, w, targets, lse, inputs["dy"], grads, logits, tile, warps)
        if grads is not None
        else ([], None)
    )

    def run() -> None:
        with on_stream():
            for x, part, rows in steps:
                torch.matmul(x, w, out=part)
                _run(rows)
            _run(mean)

    def train() -> None:
        with on_stream():
            for (x, part, rows), each in zip(steps, work, strict=True):
                torch.matmul(x, w, out=part)
                _run(rows)
                step(*each)
            _run(mean)

    if grads is None:
        return Pass(run, kept, _notes(tile, warps, tokens, opts, 2 * len(steps) + 1, chunk=min(chunk, tokens)))
    launches = 2 * len(steps) + 1 + sum(3 + (i > 0) for i in range(len(work)))
    notes = _notes(tile, warps, tokens, opts, launches, chunk=min(chunk, tokens))
    return Pass(train, Written(kept), notes)


def fused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """Chunk by chunk: logits again, g in place, dhidden rows, dweight's term (added in past the first chunk): the
    backward phase has only the lse the forward kept, so each chunk's logits are computed twice across the two
    passes. In a training step the forward wrote both gradients and this launches nothing."""
    if isinstance(saved, Written):
        return Pass(lambda: None, notes={"gradients": "written by the forward, chunk by chunk"})
    h, w, targets, lse = saved["hidden"], saved["weight"], saved["targets"], saved["logsumexp"]
    tokens, vocab, chunk = h.shape[0], w.shape[1], int(params["chunk"])
    tile, warps = _settings(vocab, params, opts)
    logits = torch.empty(min(chunk, tokens), vocab, dtype=h.dtype, device=h.device)
    work, step = _gradient_steps(h, w, targets, lse, inputs["dy"], grads, logits, tile, warps)
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            for each in work:
                torch.matmul(each[1], w, out=each[2])
                step(*each)

    launches = sum(4 + (i > 0) for i in range(len(work)))
    return Pass(run, notes=_notes(tile, warps, tokens, opts, launches, chunks=len(work)))


def unfused_forward(inputs: dict[str, Any], y: Any, params: dict, opts: dict) -> Pass:
    """Every token's logits, the log-softmax in place over them (kept), the gather and the mean."""
    h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
    tokens, vocab = h.shape[0], w.shape[1]
    tile, warps = _settings(vocab, params, opts)
    logp = torch.empty(tokens, vocab, dtype=h.dtype, device=h.device)
    losses = torch.empty(tokens, dtype=torch.float32, device=h.device)
    launches = _steps(
        [
            (_log_softmax, (tokens,), (logp, logp, vocab), {"TILE": tile}),
            (
                _gather,
                (triton.cdiv(tokens, MEAN_BLOCK),),
                (logp, targets, losses, tokens, vocab),
                {"BLOCK": MEAN_BLOCK},
            ),
            (_mean, (1,), (losses, targets, y, tokens), {"BLOCK": MEAN_BLOCK}),
        ],
        warps,
    )
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            torch.matmul(h, w, out=logp)
            for launch in launches:
                _run(launch)

    return Pass(run, {"hidden": h, "weight": w, "targets": targets, "logp": logp}, _notes(tile, warps, tokens, opts, 4))


def unfused_backward(inputs: dict[str, Any], saved: Any, grads: Any, params: dict, opts: dict) -> Pass:
    """g for every token into a tokens × vocab buffer, then dhidden = g · Wᵀ and dweight = hiddenᵀ · g."""
    h, w, targets, logp = saved["hidden"], saved["weight"], saved["targets"], saved["logp"]
    dy, dh, dw = inputs["dy"], grads["dhidden"], grads["dweight"]
    tokens, vocab = logp.shape
    tile, warps = _settings(vocab, params, opts)
    g = torch.empty_like(logp)
    args = (logp, g, targets, targets, None, dy, tokens, vocab)
    (grad,) = _steps(
        [(_grad_rows, (tokens,), args, {"HAS_LSE": False, "TILE": tile, "BLOCK": 32 * warps * COUNT_ITEMS})], warps
    )
    on_stream = BACKEND.launch_stream(opts.get("stream"))

    def run() -> None:
        with on_stream():
            _run(grad)
            torch.matmul(g, w.T, out=dh)
            torch.matmul(h.T, g, out=dw)

    return Pass(run, notes=_notes(tile, warps, tokens, opts, 3))


training(
    "linear_cross_entropy",
    backend="triton",
    device="cuda",
    fused=(fused_forward, fused_backward),
    unfused=(unfused_forward, unfused_backward),
)
