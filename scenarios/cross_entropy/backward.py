"""cross_entropy's backward pass: dlogits = dy · (softmax(logits) − onehot(target)) / counted, 0 on ignored rows.

The upstream gradient is `dy`, the gradient of the mean loss (the forward's output, shape (1,), the case's dtype);
`counted` is the number of tokens whose target is not ignore_index (−100). Targets are integers: only `dlogits`
is a gradient. n = tokens · vocab elements of s bytes below.

Unfused is the forward decomposition differentiated: the forward's log-softmax (n·s, which it writes anyway) is
kept with the targets, and one backward kernel reads logp, writes exp(logp)·dy/counted and subtracts dy/counted
at the target. Fused is Liger-Kernel's: the forward's own row pass, which has the row's max and sum of
exponentials in hand, writes the gradient of the row (scaled by dy, an input of the training step) while the row
is in cache, so the logits are read once for loss and gradient together and nothing of the log-softmax exists.
In a training step (`train`) the fused forward writes straight into the gradient's buffer and the backward
launches nothing; in the `backward` phase, where the forward ran while the case was prepared, its saved gradient
is copied into the suite's output (one copy kernel, n·s read and n·s written, ledgered as such). The train
ledger therefore has no backward kernel for `fused` (`CrossEntropyBackward.ledger`).

What each variant keeps from its forward (measured for torch with saved_tensors_hooks):
- fused: the gradient itself, n·s (the train step's gradient buffer).
- unfused: logp, n·s, and the targets, 8·tokens.
- eager (the decomposition as torch ops, in float32): logp in float32 (4·n), the gather's index (8·tokens),
  the ignore mask (tokens bytes) and the count (8).
- library (F.cross_entropy = log_softmax, nll_loss): logp in the case's dtype (n·s), targets, total_weight (s).
- compiled (AOTAutograd): the logits (an input kept alive, n·s), each row's max and log-sum-exp (float32),
  the mask and the index: the partitioner recomputes softmax in the backward instead of saving it (on a case
  as tiny as 4 × 5 it recomputes the row statistics too; the model keeps the larger cases' choice).
- liger/library (Liger's `LigerCrossEntropyFunction`, backends/liger/cross_entropy_training.py): the gradient
  alone, n·s, as fused. Its backward scales that gradient by dy in place (`element_mul_kernel`: dlogits and dy
  read, dlogits written); in the backward phase the row first copies the saved gradient into the suite's
  dlogits, as fused does, so a second launch does not scale it twice. In a training step Liger's forward writes
  straight into dlogits (after its own copy of the logits there, which it overwrites) and the backward is the
  scaling alone (`forward_ledger`, `ledger`).
"""

from __future__ import annotations

import numpy as np

from scenarios.cross_entropy import constants as ce
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.phases import BACKWARD, Backward, train_ledger
from suite.core.scenario import Params, Scenario

GRAD_FLOPS = 2
"""Per element of a gradient row: an exponential and a multiply (the target's subtraction is per token)."""


def softmax_grad(logits: np.ndarray, targets: np.ndarray, dy: float) -> np.ndarray:
    """The float64 gradient of the mean loss times `dy`, from logits of any float dtype."""
    x = logits.astype(np.float64)
    keep = targets != ce.IGNORE_INDEX
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rows = np.flatnonzero(keep)
    p[rows, targets[keep]] -= 1.0
    p[~keep] = 0.0
    return p * (float(dy) / keep.sum())


def emulated_unfused(logits: np.ndarray, targets: np.ndarray, dy: float, dtype: str) -> np.ndarray:
    """The unfused steps in float32 with `dtype` storage: logp rounded to it, the gradient computed in float32
    from it and rounded to it, as the Numba unfused kernels do."""
    x = logits.astype(np.float32)
    m = x.max(axis=1, keepdims=True)
    with np.errstate(over="ignore"):
        shift = m + np.log(np.exp(x - m).sum(axis=1, keepdims=True, dtype=np.float32))
    logp = (x - shift).astype(dtype).astype(np.float32)
    keep = targets != ce.IGNORE_INDEX
    scale = np.float32(np.float32(dy) / np.float32(keep.sum()))
    g = np.exp(logp) * scale
    rows = np.flatnonzero(keep)
    g[rows, targets[keep]] = (np.exp(logp[rows, targets[keep]]) - np.float32(1.0)) * scale
    g[~keep] = 0.0
    return g.astype(dtype)


def saved_bytes(tokens: int, vocab: int, s: int) -> dict[str, dict[str, int]]:
    """What each variant's forward keeps, in bytes (see the module docstring)."""
    n, tb = tokens * vocab, tokens * ce.TARGET_BYTES
    return {
        "fused": {"dlogits": n * s},
        "unfused": {"logp": n * s, "targets": tb},
        "eager": {"logp (float32)": n * 4, "index": tb, "keep": tokens, "counted": 8},
        "library": {"logp": n * s, "targets": tb, "total_weight": s},
        "compiled": {"logits": n * s, "row max": tokens * 4, "logsumexp": tokens * 4, "keep": tokens, "index": tb},
        "liger/library": {"dlogits": n * s},
    }


def liger_scale(tokens: int, vocab: int, s: int) -> KernelTraffic:
    """Liger's backward: the saved gradient scaled by dy in place (`element_mul_kernel`, one program a token)."""
    n = tokens * vocab
    return KernelTraffic("dlogits ·= dy in place (Liger's element_mul)", n * s + s, n * s, n)


def backward_kernels(tokens: int, vocab: int, s: int) -> dict[str, tuple]:
    """Per variant, (kernels, accesses, sizes of its intermediates): the backward pass as the ledger counts it."""
    n, tb = tokens * vocab, tokens * ce.TARGET_BYTES
    unfused = KernelTraffic("dlogits = (exp(logp) − onehot)·dy/counted", n * s + tb + s, n * s, GRAD_FLOPS * n + tokens)
    copy = KernelTraffic("copy of the forward's gradient", n * s, n * s, 0)
    scalar = KernelTraffic("loss path backward (div, sum, mask, gather)", s + tokens + 8 + tb, n * 4, tokens)
    softmax = KernelTraffic("log-softmax backward", 2 * n * 4, n * 4, 3 * n)
    cast = KernelTraffic("gradient to the case's dtype", n * 4, n * s, 0)
    eager = (scalar, softmax) + ((cast,) if s != 4 else ())
    eager_access = [(("dy",), ("dlogp",)), (("dlogp", "logp"), ("g32",))] + ([(("g32",), ("grad",))] if s != 4 else [])
    nll = KernelTraffic("nll_loss backward (zeros, scatter)", tb + s, n * s, tokens)
    lib_softmax = KernelTraffic("log-softmax backward", 2 * n * s, n * s, 3 * n)
    fused_inductor = KernelTraffic(
        "generated softmax backward", n * s + tokens * (4 + 4 + 1) + tb + s, n * s, GRAD_FLOPS * n + tokens
    )
    return {
        "fused": ((copy,), [], {}),
        "unfused": ((unfused,), [], {}),
        "eager": (eager, eager_access, {"dlogp": n * 4, "g32": n * 4, "grad": n * s}),
        "library": (
            (nll, lib_softmax),
            [(("dy",), ("dlogp",)), (("dlogp",), ("grad",))],
            {"dlogp": n * s, "grad": n * s},
        ),
        "compiled": ((fused_inductor,), [(("dy",), ("grad",))], {"grad": n * s}),
        # the row's timed copy of the saved gradient into dlogits (backward phase), then Liger's in-place scaling
        "liger/library": ((copy, liger_scale(tokens, vocab, s)), [], {}),
    }


class CrossEntropyBackward(Backward):
    grads = ("dlogits",)

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        return {"dlogits": softmax_grad(inputs["logits"], inputs["targets"], float(inputs["dy"][0]))}

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Four times the error of the unfused steps in `dtype` storage, at least what a float32 sum of `vocab`
        exponentials and the float32 exponential itself may cost (√vocab ulps, a few ulps)."""
        own = rel_err(
            emulated_unfused(inputs["logits"], inputs["targets"], float(inputs["dy"][0]), dtype), ref["dlogits"]
        )
        reduction = 4 * 2.0**-24 * (np.sqrt(params["vocab"]) + 4)
        return {"dlogits": scn.limits.clip(dtype, max(4.0 * own, reduction))}

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        return saved_bytes(params["tokens"], params["vocab"], np.dtype(dtype).itemsize)

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Each variant's backward kernels; its peak holds the case's buffers (logits, targets, dy, dlogits), what
        its forward saved (logits counted once where saved) and its intermediates while they live."""
        tokens, vocab, s = params["tokens"], params["vocab"], np.dtype(dtype).itemsize
        n = tokens * vocab
        held = 2 * n * s + tokens * ce.TARGET_BYTES + s
        out = {}
        for variant, (kernels, accesses, sizes) in backward_kernels(tokens, vocab, s).items():
            saves = saved_bytes(tokens, vocab, s)[variant]
            kept = sum(b for name, b in saves.items() if name not in ("logits", "targets"))
            peak = live_peak(held + kept, accesses, sizes) if accesses else held + kept
            out[variant] = VariantLedger(variant, kernels, peak_bytes=peak)
        return out

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The family's forward ledgers, the fused row kernel also reading dy and writing the gradient (n·s)
        and its peak holding that gradient beside the case's buffers (dy and dlogits among them)."""
        tokens, vocab, s = params["tokens"], params["vocab"], np.dtype(dtype).itemsize
        n = tokens * vocab
        out = dict(scn.ledger(params, dtype))
        rows, mean = out["fused"].kernels
        writing = KernelTraffic(
            "cross-entropy rows writing dlogits (fused)",
            rows.bytes_read + s,
            rows.bytes_written + n * s,
            rows.flops + GRAD_FLOPS * n + tokens,
        )
        held = 2 * n * s + tokens * ce.TARGET_BYTES + 2 * s  # logits, dlogits, targets, dy, the loss
        peak = held + tokens * ce.LOSS_BYTES
        out["fused"] = VariantLedger("fused", (writing, mean), (Intermediate("log-softmax", n, s),), peak)
        # Liger's: the row's timed copy of the logits into dlogits (its kernel overwrites its input), then its row
        # kernel there, writing the unscaled gradient (dy is not read until the backward), and the sum of the losses
        copy = KernelTraffic("copy of the logits into dlogits (Liger works in place)", n * s, n * s, 0)
        liger = KernelTraffic(
            "cross-entropy rows writing dlogits (Liger)",
            rows.bytes_read,
            rows.bytes_written + n * s,
            rows.flops + GRAD_FLOPS * n + tokens,
        )
        out["liger/library"] = VariantLedger("liger/library", (copy, liger, mean), peak_bytes=peak)
        return out

    def ledger(self, scn: Scenario, params: Params, dtype: str, phase: str) -> dict[str, VariantLedger]:
        """As `Backward.ledger`, but a fused training step is its forward alone: that forward writes the
        gradient into its buffer, and the backward's copy exists only in the backward phase. Liger's step is its
        forward and its in-place scaling, no copy of the gradient either."""
        out = super().ledger(scn, params, dtype, phase)
        if phase != BACKWARD:
            forward = self.forward_ledger(scn, params, dtype)
            out["fused"] = forward["fused"]
            tokens, vocab, s = params["tokens"], params["vocab"], np.dtype(dtype).itemsize
            scale = VariantLedger("liger/library", (liger_scale(tokens, vocab, s),))
            out["liger/library"] = train_ledger(forward["liger/library"], scale)  # scaled where it was written
        return out
