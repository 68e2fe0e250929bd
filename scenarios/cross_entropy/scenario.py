"""Cross-entropy of a language model's logits: the mean token loss, where the tokens × vocab matrix is the cost.

loss = mean over tokens t with target[t] ≠ ignore_index (−100) of  logsumexp(x[t, :]) − x[t, target[t]].

Unfused, as `F.log_softmax` then `F.nll_loss` run: a row kernel writes the log-softmax (tokens × vocab, the
case's dtype), a gather kernel picks −logp[t, target[t]] into a float32 loss per token (0 where ignored), and a
mean kernel divides their sum by the number of counted tokens. Fused: one kernel reads each row once in chunks
of `tile` columns with an online max and a rescaled sum, picks the target's logit on the way and writes the
token's loss; the same mean kernel follows (the ledger counts it: a few bytes a token). Fusion removes the
log-softmax matrix: 2·tokens·vocab·s bytes of traffic and tokens·vocab·s bytes of peak memory.

Targets are int64 (torch's), ignored tokens −100; the harness uploads every input as it is, so they travel as
integers to every backend. The output is one value of the case's dtype (torch's loss has the logits' dtype).
Every kernel computes in float32. The ledger counts each kernel reading every tensor it names once (a row of
the log-softmax kernel is read once: its second pass finds it on chip or in cache) and writing its output once.
"""

from __future__ import annotations

import numpy as np

from scenarios.cross_entropy.backward import CrossEntropyBackward
from scenarios.cross_entropy.blocked import BLOCK_BYTES, log_softmax, mean_loss_by_rows
from scenarios.cross_entropy.config import CrossEntropyConfig
from scenarios.cross_entropy.constants import IGNORE_INDEX, LOSS_BYTES, TARGET_BYTES
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import Intermediate, KernelTraffic, VariantLedger, live_peak
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

TILE_MIN, TILE_MAX = 32, 16384
OFFSET = 100.0
"""Odd rows are shifted by +100: exp(103) overflows float32, so only a kernel that subtracts the max survives."""
LIMITS = Tolerance(per_dtype(1e-5, 1e-3, bfloat16=0.016), per_dtype(1e-3, 2e-2))
"""A scalar loss: float16's floor is half the elementwise families' (one rounding of a mean), bfloat16's theirs."""


def make_targets(tokens: int, vocab: int, rng: np.random.Generator) -> np.ndarray:
    """Targets in [0, vocab), about one token in eight ignored (−100), the first never: the mean has a count."""
    targets = rng.integers(0, vocab, tokens, dtype=np.int64)
    targets[rng.random(tokens) < 0.125] = IGNORE_INDEX
    targets[0] = rng.integers(0, vocab)
    return targets


def mean_loss(logp: np.ndarray, targets: np.ndarray) -> float:
    """The mean of −logp[t, target[t]] over the counted tokens."""
    keep = targets != IGNORE_INDEX
    return float(-logp[np.flatnonzero(keep), targets[keep]].sum() / keep.sum())


def ce_ledger(
    tokens: int,
    vocab: int,
    s: int,
    *,
    fused_reads: int,
    held: int,
    extra_kernels: tuple = (),
    extra_sizes: dict | None = None,
) -> dict[str, VariantLedger]:
    """The unfused and fused ledgers over a logits matrix of tokens × vocab (`fused_reads`: what the fused row
    kernel reads besides the targets; `held`: inputs and output in bytes; `extra_kernels`: (KernelTraffic,
    reads, writes) run before the cross-entropy, e.g. the matmul making the logits)."""
    n = tokens * vocab
    row = KernelTraffic("log-softmax", n * s, n * s, 4 * n)
    gather = KernelTraffic("gather −logp[target]", tokens * (TARGET_BYTES + s), tokens * LOSS_BYTES, tokens)
    mean = KernelTraffic("mean over counted tokens", tokens * (LOSS_BYTES + TARGET_BYTES), s, 2 * tokens)
    fused = KernelTraffic(
        "cross-entropy rows (fused)", fused_reads + tokens * TARGET_BYTES, tokens * LOSS_BYTES, 4 * n + tokens
    )
    pre = tuple(k for k, _, _ in extra_kernels)
    accesses = [(r, w) for _, r, w in extra_kernels]
    accesses += [(("logits",), ("logp",)), (("logp", "targets"), ("losses",)), (("losses", "targets"), ("loss",))]
    sizes = {"logp": n * s, "losses": tokens * LOSS_BYTES, **(extra_sizes or {})}
    apart = live_peak(held, accesses, sizes)
    return {
        "unfused": VariantLedger("unfused", (*pre, row, gather, mean), peak_bytes=apart),
        "fused": VariantLedger(
            "fused", (fused, mean), (Intermediate("log-softmax", n, s),), held + tokens * LOSS_BYTES
        ),
    }


@register
class CrossEntropy(Scenario):
    name = "cross_entropy"
    config = CrossEntropyConfig
    model_tour = "model_cross_entropy"
    limits = LIMITS
    inputs = ("logits", "targets")
    training = CrossEntropyBackward()
    train_tour = "train_cross_entropy"
    gpu_check = "gpu_cross_entropy"
    summary = {"tokens": 4096, "vocab": 128256}
    variants = ("fused", "unfused", "library", "eager", "compiled")
    axes = ("tokens", "vocab", "tile")
    size_axis = "vocab"
    memory_bound = True
    presets = {
        "S": {"tokens": [33], "vocab": [781, 5003], "tile": [1024]},
        # M: 2,047 tokens of GPT-2's and Llama-2's vocabularies (262 MB of float32 logits at 32,000), past any cache.
        "M": {"tokens": [2047], "vocab": [8192, 32000, 50257], "tile": [2048]},
        "L": {"tokens": [8192], "vocab": [32000, 128256], "tile": [2048]},
    }
    checks = [
        {"tokens": 7, "vocab": 3, "tile": 32},
        {"tokens": 9, "vocab": 781, "tile": 256},
        {"tokens": 5, "vocab": 4099, "tile": 4096},
    ]
    """vocab 3 (within one chunk); 781 in ragged chunks of 256; 4099, one column past the tile; odd token counts, ignored rows."""

    def check(self, params: Params) -> None:
        for key in ("tokens", "vocab", "tile"):
            value = params[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        tile = params["tile"]
        if tile & (tile - 1) or not TILE_MIN <= tile <= TILE_MAX:
            raise ConfigError(f"scenario.tile={tile} must be a power of two in {TILE_MIN}..{TILE_MAX}")
        need = params["tokens"] * params["vocab"] * 4 * 3 + 4 * BLOCK_BYTES  # logits, logp; the reference's blocks
        guard(need, f"cross_entropy over {params['tokens']} × {params['vocab']} logits")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        return {"logits": (params["tokens"], params["vocab"]), "targets": (params["tokens"],)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        tokens, vocab = params["tokens"], params["vocab"]
        x = rng.random((tokens, vocab), dtype=np.float32) * np.float32(6.0) - np.float32(3.0)
        x[1::2] += np.float32(OFFSET)
        return {"logits": x.astype(dtype), "targets": make_targets(tokens, vocab, rng)}

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        """float64, a block of rows at a time (`blocked`): at a model's vocabulary the whole would not fit."""
        x = inputs["logits"]
        logp = lambda start, stop: log_softmax(x[start:stop].astype(np.float64))
        return np.array([mean_loss_by_rows(logp, inputs["targets"], x.shape[1] * 8 * 3)])

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (1,)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        tokens, vocab, s = params["tokens"], params["vocab"], np.dtype(dtype).itemsize
        held = tokens * vocab * s + tokens * TARGET_BYTES + s
        out = ce_ledger(tokens, vocab, s, fused_reads=tokens * vocab * s, held=held)
        fused = out["fused"]
        out["library"] = VariantLedger("library", fused.kernels, fused.removed, fused.peak_bytes)
        out["compiled"] = VariantLedger("compiled", fused.kernels, fused.removed, fused.peak_bytes)
        out["eager"] = VariantLedger("eager", out["unfused"].kernels, peak_bytes=out["unfused"].peak_bytes)
        return out

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of the unfused steps done in `dtype` storage (the log-softmax rounded to it), at
        least what a float32 sum of `vocab` terms and a float32 mean of the tokens may cost (√n ulps each)."""
        x = inputs["logits"]
        logp = lambda start, stop: log_softmax(x[start:stop].astype(np.float32)).astype(dtype)
        with np.errstate(over="ignore"):
            unfused = mean_loss_by_rows(logp, inputs["targets"], x.shape[1] * 4 * 3)
        own = abs(unfused - ref[0]) / max(abs(ref[0]), 1e-3)
        reduction = 4 * 2.0**-24 * (np.sqrt(params["vocab"]) + np.sqrt(params["tokens"]))
        return self.limits.clip(dtype, max(4.0 * own, reduction))

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer tokens; a vocabulary wider than the budget shrinks too, but stays wider than a smaller tile."""
        tokens, vocab, tile = params["tokens"], params["vocab"], params["tile"]
        if vocab <= max_elements:
            return {**params, "tokens": max(1, min(tokens, max_elements // vocab))}
        small = max(TILE_MIN, min(tile, 1 << max(0, (max_elements // 2).bit_length() - 1)))
        return {**params, "tokens": 1, "vocab": max(max_elements - 1, small + 1), "tile": small}
