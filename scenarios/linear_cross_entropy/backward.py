"""linear_cross_entropy's backward pass: with l = hidden · W and g = dy · (softmax(l) − onehot(target)) / counted
(0 on ignored rows), dhidden = g · Wᵀ and dweight = hiddenᵀ · g. Upstream `dy` is the mean loss's gradient
(shape (1,), the case's dtype). T tokens, H hidden, V vocabulary, s bytes; c the fused variant's chunk.

Unfused, as a model's autograd runs it: the forward writes every token's logits (T·V·s) and turns them into
the log-softmax in place, which it keeps; the backward writes all of g (another T·V·s), then the two GEMMs.
Fused, the memory case: the backward goes chunk by chunk of tokens as the fused forward does, recomputing the
chunk's logits (GEMM), turning them into the chunk's g in place, then dhidden[chunk] = g · Wᵀ and
dweight += hiddenᵀ[chunk] · g; no more than c × V of logits or gradient ever exists. The forward keeps the
inputs and each token's log-sum-exp (T·4, written by its row kernel beside the loss) so that g is one
exponential per logit. NumPy's matmul cannot accumulate (no β = 1), so every chunk after the first writes its
dweight term into an H × V float32 scratch and a parallel kernel adds it in: 3·H·V·4 more bytes a chunk,
ledgered as its own kernel. Fused traffic is therefore higher (W read three times a chunk, the logits GEMM
done twice); what it buys is the (T − c)·V·s bytes of the logits and again of their gradient in peak memory.
That is the backward phase, handed only what the forward kept. A fused training step does Liger's: its forward,
chunk by chunk, computes the logits and the loss, then at once g in place, dhidden's rows and dweight's term,
so each chunk's logits are computed once (three GEMMs a chunk, as unfused) and the backward launches nothing
(`fused_train`); it still keeps the lse (g is computed from it) and its peak holds one chunk buffer.

What each variant keeps from its forward:
- fused: hidden (T·H·s), weight (H·V·s), targets (8·T), the log-sum-exp (4·T).
- unfused: hidden, weight, targets and the log-softmax (T·V·s).
- eager (torch.matmul then F.cross_entropy, the family's eager forward): hidden and weight (the GEMM's),
  the log-softmax (T·V·s), targets, total_weight (s).
- compiled (AOTAutograd): hidden, weight, the logits (T·V·s, the GEMM's output), each row's max and
  log-sum-exp (float32), targets and the count (4).
- liger/library (Liger's `LigerFusedLinearCrossEntropyFunction`, backends/liger/linear_cross_entropy_training.py):
  both gradients, dhidden (T·H·s) and dweight (H·V·s), which its forward computes; nothing of the hidden
  states, the weight or the vocabulary × tokens. Its backward checks dy against 1 (`torch.equal`, a host sync;
  dy is handed as autograd hands it, a float32 scalar) and scales each gradient by it in place
  (`element_mul_kernel`, twice). In the backward phase the row first copies the saved gradients into the
  suite's dhidden and dweight (timed), so a second launch does not scale them twice. In a training step its
  forward does the gradients' work (`forward_ledger`) and the backward is the check and the scaling alone, of
  Liger's own tensors (copied into the suite's after the launch, untimed).
torch has no linear cross-entropy of its own (the family's library is Liger's, on CUDA): no bare `library` here.
"""

from __future__ import annotations

import numpy as np

from scenarios.cross_entropy.backward import emulated_unfused, softmax_grad
from scenarios.cross_entropy.constants import LOSS_BYTES, TARGET_BYTES
from scenarios.linear_cross_entropy import chunks as lce
from suite.core.ledger import KernelTraffic, VariantLedger, live_peak
from suite.core.numerics import rel_err
from suite.core.phases import BACKWARD, Backward, train_ledger
from suite.core.scenario import Params, Scenario
from suite.core.tolerances import Tolerance

CEILING = 1.0
"""The forward's floor, but no ceiling below the gradient's own conditioning (1: an error never exceeds the element
it is judged against). The forward's 3% for float16 is under what the unfused steps themselves lose in half
storage on some draws (dweight 4.6% at 7 tokens × 37 vocab): four times the emulated error stands, as in the
normalization families' backward."""
GRAD_FLOPS = 2
"""Per logit: an exponential and a multiply."""
EPS32 = 2.0**-24


def gradients(hidden: np.ndarray, weight: np.ndarray, targets: np.ndarray, dy: float) -> dict[str, np.ndarray]:
    h, w = hidden.astype(np.float64), weight.astype(np.float64)
    g = softmax_grad(h @ w, targets, dy)
    return {"dhidden": g @ w.T, "dweight": h.T @ g}


def saved_bytes(t: int, h: int, v: int, s: int) -> dict[str, dict[str, int]]:
    inputs = {"hidden": t * h * s, "weight": h * v * s, "targets": t * TARGET_BYTES}
    return {
        "fused": {**inputs, "logsumexp": t * 4},
        "unfused": {**inputs, "logp": t * v * s},
        "eager": {**inputs, "logp": t * v * s, "total_weight": s},
        "compiled": {**inputs, "logits": t * v * s, "row max": t * 4, "logsumexp": t * 4, "counted": 4},
        "liger/library": {"dhidden": t * h * s, "dweight": h * v * s},
    }


LIGER_DY = 4
"""Liger's loss is float32 at every dtype: its backward reads the upstream gradient as a float32 scalar."""


def liger_scaling(t: int, h: int, v: int, s: int) -> tuple[KernelTraffic, ...]:
    """Liger's backward: dy compared with 1 (`torch.equal`: dy and the constant read, a bool written, then a host
    sync), then dhidden and dweight scaled by dy in place (`element_mul_kernel` over each)."""
    return (
        KernelTraffic("dy == 1 (torch.equal, a host sync)", 2 * LIGER_DY, 1, 1),
        KernelTraffic("dhidden ·= dy in place (Liger's element_mul)", t * h * s + LIGER_DY, t * h * s, t * h),
        KernelTraffic("dweight ·= dy in place (Liger's element_mul)", h * v * s + LIGER_DY, h * v * s, h * v),
    )


def _grad_gemms(n: int, h: int, v: int, s: int, what: str) -> tuple[KernelTraffic, ...]:
    """g (n × V, already written) into dhidden rows and dweight: the backward's two GEMMs."""
    return (
        KernelTraffic(f"dhidden = g · Wᵀ ({what})", (n * v + h * v) * s, n * h * s, 2 * n * h * v),
        KernelTraffic(f"dweight = hiddenᵀ · g ({what})", (n * h + n * v) * s, h * v * s, 2 * n * h * v),
    )


def chunk_gradient(i: int, a: int, b: int, h: int, v: int, s: int) -> list[KernelTraffic]:
    """The fused variant's work on chunk i's logits (tokens a..b−1, already in its buffer): g in place from the
    lse, dhidden's rows and dweight's term, added in from the float32 scratch past the first chunk."""
    m, what = b - a, f"tokens {a}..{b - 1}"
    out = [
        KernelTraffic(f"g in place ({what})", m * v * s + m * (TARGET_BYTES + 4) + s, m * v * s, GRAD_FLOPS * m * v),
        *_grad_gemms(m, h, v, s, what),
    ]
    if i:
        out.append(KernelTraffic(f"dweight += scratch ({what})", h * v * (s + 4), h * v * s, h * v))
    return out


def backward_kernels(t: int, h: int, v: int, c: int, s: int) -> dict[str, tuple]:
    """Per variant (kernels, accesses, intermediate sizes) of the backward pass."""
    n, tb = t * v, t * TARGET_BYTES
    grad = KernelTraffic("g = (exp(logp) − onehot)·dy/counted", n * s + tb + s, n * s, GRAD_FLOPS * n + t)
    unfused = (grad, *_grad_gemms(t, h, v, s, "every token"))
    fused: list[KernelTraffic] = []
    for i, (a, b) in enumerate(lce.chunks(t, c)):
        m, what = b - a, f"tokens {a}..{b - 1}"
        fused.append(KernelTraffic(f"logits = hidden · W ({what})", (m * h + h * v) * s, m * v * s, 2 * m * h * v))
        fused.extend(chunk_gradient(i, a, b, h, v, s))
    nll = KernelTraffic("nll_loss backward (zeros, scatter)", tb + s, n * s, t)
    softmax = KernelTraffic("log-softmax backward", 2 * n * s, n * s, 3 * n)
    inductor = KernelTraffic("generated softmax backward", n * s + t * (4 + 4) + tb + s, n * s, GRAD_FLOPS * n + t)
    mm = _grad_gemms(t, h, v, s, "every token")
    # Liger's row: the timed copies of its saved gradients into the suite's dhidden and dweight, then its scaling
    copies = (
        KernelTraffic("copy of the saved dhidden (Liger scales in place)", t * h * s, t * h * s, 0),
        KernelTraffic("copy of the saved dweight (Liger scales in place)", h * v * s, h * v * s, 0),
    )
    return {
        "unfused": (unfused, [((), ("g",)), (("g",), ()), (("g",), ())], {"g": n * s}),
        "liger/library": ((*copies, *liger_scaling(t, h, v, s)), [], {}),
        "fused": (tuple(fused), [], {}),
        "eager": (
            (nll, softmax, *mm),
            [((), ("dlogp",)), (("dlogp",), ("g",)), (("g",), ("dh",)), (("g",), ("dw",))],
            {"dlogp": n * s, "g": n * s, "dh": t * h * s, "dw": h * v * s},
        ),
        "compiled": (
            (inductor, *mm),
            [((), ("g",)), (("g",), ("dh",)), (("g",), ("dw",))],
            {"g": n * s, "dh": t * h * s, "dw": h * v * s},
        ),
    }


class LinearCrossEntropyBackward(Backward):
    grads = ("dhidden", "dweight")

    def reference(self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params) -> dict[str, np.ndarray]:
        return gradients(inputs["hidden"], inputs["weight"], inputs["targets"], float(inputs["dy"][0]))

    def tolerance(
        self, scn: Scenario, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: dict[str, np.ndarray]
    ) -> dict[str, float]:
        """Per gradient, four times the error of the unfused steps in `dtype` storage (float32 GEMMs, logits,
        logp and g rounded to it), at least four times what float32 GEMMs may cost: the logits' √H ulps of
        Σ|h·w| (relative in every probability), plus √K ulps of the gradient GEMM's Σ|a·b| over its length K —
        V for dhidden, T for dweight, a reduction across tokens — relative to the gradient's largest value."""
        h, w, targets = inputs["hidden"], inputs["weight"], inputs["targets"]
        dy = float(inputs["dy"][0])
        h32, w32 = h.astype(np.float32), w.astype(np.float32)
        logits = (h32 @ w32).astype(dtype)
        g = emulated_unfused(logits, targets, dy, dtype).astype(np.float32)
        emulated = {"dhidden": (g @ w32.T).astype(dtype), "dweight": (h32.T @ g).astype(dtype)}
        h64, w64 = np.abs(h.astype(np.float64)), np.abs(w.astype(np.float64))
        logit_err = 2 * np.sqrt(params["hidden"]) * EPS32 * float((h64 @ w64).max())
        g64 = np.abs(softmax_grad(h @ w.astype(np.float64), targets, dy))
        sums = {"dhidden": (g64 @ w64.T, params["vocab"]), "dweight": (h64.T @ g64, params["tokens"])}
        out = {}
        for name, (magnitude, length) in sums.items():
            scale = max(float(np.abs(ref[name]).max()), 1e-30)
            gemm = logit_err + np.sqrt(length) * EPS32 * float(magnitude.max()) / scale
            out[name] = Tolerance(scn.limits.floor, CEILING).clip(
                dtype, max(4.0 * rel_err(emulated[name], ref[name]), 4.0 * gemm)
            )
        return out

    def saved(self, scn: Scenario, params: Params, dtype: str) -> dict[str, dict[str, int]]:
        s = np.dtype(dtype).itemsize
        return saved_bytes(params["tokens"], params["hidden"], params["vocab"], s)

    def backward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """Each variant's backward kernels; its peak holds the case's buffers (hidden, W, targets, dy, dhidden,
        dweight), what its forward saved beyond them, and its intermediates while they live: the fused one's
        chunk of logits (c × V × s) and, past one chunk, its H × V float32 scratch, the whole time."""
        t, h, v, c = params["tokens"], params["hidden"], params["vocab"], params["chunk"]
        s = np.dtype(dtype).itemsize
        held = 2 * (t * h + h * v) * s + t * TARGET_BYTES + s
        out = {}
        for variant, (kernels, accesses, sizes) in backward_kernels(t, h, v, c, s).items():
            kept = sum(
                b for k, b in saved_bytes(t, h, v, s)[variant].items() if k not in ("hidden", "weight", "targets")
            )
            if variant == "fused":
                spans = lce.chunks(t, c)
                scratch = h * v * 4 if len(spans) > 1 else 0
                peak = held + kept + max(b - a for a, b in spans) * v * s + scratch
            elif variant == "liger/library":
                peak = held + kept  # its saved gradients beside the suite's
            else:
                peak = live_peak(held + kept, accesses, sizes)
            out[variant] = VariantLedger(variant, kernels, peak_bytes=peak)
        return out

    def forward_ledger(self, scn: Scenario, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The family's forward ledgers but for what saving changes. Fused: each chunk's row kernel writes the
        tokens' log-sum-exp too (4 bytes a token). Unfused: the GEMM's logits become the log-softmax in place
        (read and written once more), the gather of −logp[target] and the mean follow, logp kept."""
        t, v, c, s = params["tokens"], params["vocab"], params["chunk"], np.dtype(dtype).itemsize
        out = dict(scn.ledger(params, dtype))
        fused = out["fused"]
        spans = iter(lce.chunks(t, c))
        kernels = []
        for k in fused.kernels:
            if k.name.startswith("cross-entropy rows"):
                a, b = next(spans)
                k = KernelTraffic(k.name + " and log-sum-exp", k.bytes_read, k.bytes_written + (b - a) * 4, k.flops)
            kernels.append(k)
        out["fused"] = VariantLedger("fused", tuple(kernels), fused.removed, fused.peak_bytes + t * 4)
        gemm, _, mean = out["unfused"].kernels
        n = t * v
        log_softmax = KernelTraffic("log-softmax in place", n * s, n * s, 4 * n)
        gather = KernelTraffic("gather −logp[target]", t * (TARGET_BYTES + s), t * LOSS_BYTES, t)
        out["unfused"] = VariantLedger(
            "unfused", (gemm, log_softmax, gather, mean), peak_bytes=out["unfused"].peak_bytes
        )
        out["liger/library"] = liger_forward(out["library"], params, s)
        return out

    def ledger(self, scn: Scenario, params: Params, dtype: str, phase: str) -> dict[str, VariantLedger]:
        """As `Backward.ledger`, but a training step's forward does the gradients' work where it can: the fused
        one's (`fused_train`), and Liger's, whose step is then its forward and its scaling alone (its row copies
        no saved gradient there)."""
        out = super().ledger(scn, params, dtype, phase)
        if phase != BACKWARD:
            t, h, v, s = params["tokens"], params["hidden"], params["vocab"], np.dtype(dtype).itemsize
            forward = self.forward_ledger(scn, params, dtype)
            scale = VariantLedger("liger/library", liger_scaling(t, h, v, s))
            out["liger/library"] = train_ledger(forward["liger/library"], scale)
            out["fused"] = fused_train(forward["fused"], params, s)
        return out


def fused_train(forward: VariantLedger, params: Params, s: int) -> VariantLedger:
    """The fused training step, Liger's structure on the fused variant's own chunks: each chunk's GEMM and row
    kernel (loss and lse), then at once its g in place, dhidden's rows and dweight's term (`chunk_gradient`), so
    no chunk's logits are computed twice (three GEMMs a chunk); the mean last, and no backward kernel. Its peak:
    the case's buffers (hidden, W, targets, dy, y, dhidden, dweight), the losses and the lse, one chunk's logits
    and, past one chunk, the H × V float32 scratch."""
    t, h, v, c = params["tokens"], params["hidden"], params["vocab"], params["chunk"]
    *rows, mean = forward.kernels
    spans = lce.chunks(t, c)
    kernels: list[KernelTraffic] = []
    for i, (a, b) in enumerate(spans):
        kernels.extend(rows[2 * i : 2 * i + 2])
        kernels.extend(chunk_gradient(i, a, b, h, v, s))
    held = 2 * (t * h + h * v) * s + t * TARGET_BYTES + 2 * s + t * (LOSS_BYTES + 4)
    scratch = h * v * 4 if len(spans) > 1 else 0
    peak = held + max(b - a for a, b in spans) * v * s + scratch
    return VariantLedger("fused", (*kernels, mean), forward.removed, peak)


def liger_forward(library: VariantLedger, params: Params, s: int) -> VariantLedger:
    """Liger's forward with gradients, in a training step: its forward row's ledger (`library`, at its own chunk)
    with its zeroed dweight, each chunk's cross-entropy kernel also writing the chunk's gradient over its logits,
    then dhidden[chunk] = g · W (into its zeroed dhidden) and g's product with the chunk's hidden states added into
    dweight: in place (`addmm`) below float32, a float32 product then its add at float32; finally the loss (a
    float32 scalar) copied into the suite's y. Its peak: the forward row's, dy, the suite's two gradients,
    Liger's dweight and, at float32, the product."""

    t, h, v = params["tokens"], params["hidden"], params["vocab"]
    hv = h * v * s
    spans = iter(lce.chunks(t, lce.liger_chunk(t, h, v)))
    kernels: list[KernelTraffic] = []
    for k in library.kernels:
        if not k.name.startswith("cross-entropy rows"):
            kernels.append(k)
            if k.name.startswith("zeroed gradient buffer"):
                kernels.append(KernelTraffic("zeroed dweight buffer (Liger's)", 0, hv, 0))
            continue
        a, b = next(spans)
        m, what = b - a, f"tokens {a}..{b - 1}"
        more = KernelTraffic(
            k.name + " writing g", k.bytes_read, k.bytes_written + m * v * s, k.flops + GRAD_FLOPS * m * v
        )
        kernels.append(more)
        kernels.append(KernelTraffic(f"dhidden = g · W ({what})", (m * v * s + hv), m * h * s, 2 * m * h * v))
        if s == 4:
            kernels.append(KernelTraffic(f"gᵀ · hidden ({what})", (m * v + m * h) * s, hv, 2 * m * h * v))
            kernels.append(KernelTraffic(f"dweight += gᵀ · hidden ({what})", 2 * hv, hv, h * v))
        else:
            kernels.append(
                KernelTraffic(f"dweight += gᵀ · hidden, addmm ({what})", (m * v + m * h) * s + hv, hv, 2 * m * h * v)
            )
    kernels.append(KernelTraffic("loss copied into y", LOSS_BYTES, s, 0))
    peak = library.peak_bytes + s + t * h * s + hv + hv + (hv if s == 4 else 0)
    return VariantLedger("liger/library", tuple(kernels), library.removed, peak)
