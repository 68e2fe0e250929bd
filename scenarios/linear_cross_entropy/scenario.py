"""The LM head and its loss together: mean token cross-entropy of logits = hidden · W, where the logits are the
cost in memory. Liger-Kernel's fused linear cross-entropy, Apple's Cut Cross-Entropy and torch's chunked losses
exist to never hold them all: at Llama-3-8B's vocabulary 8,192 tokens of float32 logits take 4 GiB.

loss = mean over tokens t with target[t] ≠ −100 of  logsumexp(l[t, :]) − l[t, target[t]],  l = hidden · W.

Unfused: the GEMM writes the logits of every token (tokens × vocab, the case's dtype), the cross-entropy family's
fused row kernel reads each row once into a float32 loss per token, and its mean kernel divides the sum by the
counted tokens. Fused: the same two kernels a chunk of `chunk` tokens at a time over one chunk × vocab buffer,
then the same mean; no more than a chunk's logits ever exist. Nothing is removed from the traffic: every chunk
writes and reads its logits as the unfused GEMM does, and every chunk's GEMM reads W again (⌈tokens/chunk⌉
times); what fusion removes is (tokens − chunk) × vocab × s bytes of peak memory, and on a GPU the chunk's
logits may stay in L2 between its two kernels (which the ledger, counting the outer-memory boundary, does not
credit). So this family's question is the other one: how much memory, at what cost in time.

W is the LM head's weight stored as (hidden, vocab), so that every backend's GEMM is hidden @ W (a BLAS reads
either layout at one speed; Hugging Face's nn.Linear keeps it (vocab, hidden) and multiplies by its transpose).
Targets are int64, about one token in eight ignored; the output is one value of the case's dtype. The GEMM is
each backend's: the library GEMM of its array package (cuBLAS through torch or CuPy, NumPy's BLAS on the CPU),
the matmul family's tiled kernel for Numba CUDA, which has no BLAS. The `library` is Liger-Kernel's fused linear
cross-entropy (on CUDA), at the chunk it picks itself (`liger_chunk`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from scenarios.cross_entropy import make_targets
from scenarios.cross_entropy.blocked import BLOCK_BYTES, mean_loss_by_columns, spans
from scenarios.cross_entropy.scenario import LIMITS, TARGET_BYTES
from scenarios.linear_cross_entropy.backward import LinearCrossEntropyBackward
from scenarios.linear_cross_entropy.chunks import chunks, liger_chunk
from scenarios.linear_cross_entropy.config import LinearCrossEntropyConfig
from suite.core.errors import ConfigError
from suite.core.host_memory import guard
from suite.core.ledger import KernelTraffic, VariantLedger
from suite.core.scenario import Params, Scenario, register
from suite.core.tolerances import Tolerance, per_dtype

LOSS_BYTES = 4
TILE_MIN, TILE_MAX = 32, 16384


def linear_ce_ledger(tokens: int, hidden: int, vocab: int, chunk: int, s: int) -> dict[str, VariantLedger]:
    """Unfused (one GEMM over every token, the row kernel, the mean) and fused (GEMM and row kernel a chunk at a
    time, the mean), each kernel reading every tensor it names once and writing its output once."""
    held = (tokens * hidden + hidden * vocab) * s + tokens * TARGET_BYTES + s + tokens * LOSS_BYTES

    def pair(start: int, stop: int, what: str) -> tuple[KernelTraffic, KernelTraffic]:
        n = stop - start
        gemm = KernelTraffic(
            f"logits = hidden · W ({what})", (n * hidden + hidden * vocab) * s, n * vocab * s, 2 * n * hidden * vocab
        )
        rows = KernelTraffic(
            f"cross-entropy rows ({what})", n * vocab * s + n * TARGET_BYTES, n * LOSS_BYTES, 4 * n * vocab + n
        )
        return gemm, rows

    mean = KernelTraffic("mean over counted tokens", tokens * (LOSS_BYTES + TARGET_BYTES), s, 2 * tokens)
    apart = (*pair(0, tokens, "every token"), mean)
    spans = chunks(tokens, chunk)
    together = tuple(k for start, stop in spans for k in pair(start, stop, f"tokens {start}..{stop - 1}"))
    largest = max(stop - start for start, stop in spans)
    unfused = VariantLedger("unfused", apart, peak_bytes=held + tokens * vocab * s)
    # torch's F.linear, then F.cross_entropy: log-softmax written out (another tokens × vocab), then nll_loss.
    n = tokens * vocab
    log_softmax = KernelTraffic("log-softmax", n * s, n * s, 4 * n)
    nll = KernelTraffic("nll_loss", tokens * (TARGET_BYTES + s), s, 2 * tokens)
    return {
        "unfused": unfused,
        "fused": VariantLedger("fused", (*together, mean), peak_bytes=held + largest * vocab * s),
        "eager": VariantLedger("eager", (apart[0], log_softmax, nll), peak_bytes=held + 2 * n * s),
        # Inductor calls the library GEMM into the whole logits, then fuses the loss into its reductions.
        "compiled": VariantLedger("compiled", apart, peak_bytes=unfused.peak_bytes),
    }


@register
class LinearCrossEntropy(Scenario):
    name = "linear_cross_entropy"
    config = LinearCrossEntropyConfig
    model_tour = "model_linear_cross_entropy"
    """In the model tour at the model's hidden and vocabulary: its GEMM (2·tokens·hidden·vocab FLOP, 2 TFLOP for
    2,048 tokens of Llama-3-8B) is the tour's longest case on a CPU."""
    limits = Tolerance(LIMITS.floor, per_dtype(1e-3, 3e-2))
    """cross_entropy's floor; a higher half-precision ceiling: the logits are a GEMM's, rounded to storage."""
    inputs = ("hidden", "weight", "targets")
    training = LinearCrossEntropyBackward()
    train_tour = "train_linear_cross_entropy"
    gpu_check = "gpu_linear_cross_entropy"
    summary = {"tokens": 4096}
    variants = ("fused", "unfused", "library", "eager", "compiled")
    axes = ("tokens", "hidden", "vocab", "chunk", "tile")
    size_axis = "tokens"
    presets = {
        "S": {"tokens": [33], "hidden": [64], "vocab": [781], "chunk": [8], "tile": [256]},
        # M: a 32,000 vocabulary at hidden 256, so the logits outgrow W: 4,096 tokens of float32 logits are 524 MB
        # against 33 MB of W, a chunk of 512 holds 66 MB (peak modeled 5.5× smaller); the GEMM (67 GFLOP) keeps a
        # call near half a second here. Smaller chunks cost more on a CPU than the GEMM's re-reads of W: see the
        # docs/families.md on OpenMP's spinning threads.
        "M": {"tokens": [1024, 4096], "hidden": [256], "vocab": [32000], "chunk": [512], "tile": [2048]},
        "L": {"tokens": [4096, 8192], "hidden": [4096], "vocab": [128256], "chunk": [1024], "tile": [2048]},
    }
    checks = [
        {"tokens": 7, "hidden": 16, "vocab": 3, "chunk": 4, "tile": 32},
        {"tokens": 6, "hidden": 33, "vocab": 257, "chunk": 4, "tile": 64},
        {"tokens": 5, "hidden": 64, "vocab": 100, "chunk": 2, "tile": 32},
    ]
    """vocab 3 (one tile), 257 and 100 in ragged tiles; token counts in ragged chunks (4 + 3, 4 + 2, 2 + 2 + 1);
    hidden 33, odd. Small, because the CUDA simulator runs every thread of the GEMM and the row kernel."""

    def check(self, params: Params) -> None:
        for key in ("tokens", "hidden", "vocab", "chunk", "tile"):
            value = params[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"scenario.{key}={value!r} must be a positive integer")
        tile = params["tile"]
        if tile & (tile - 1) or not TILE_MIN <= tile <= TILE_MAX:
            raise ConfigError(f"scenario.tile={tile} must be a power of two in {TILE_MIN}..{TILE_MAX}")
        tokens, hidden, vocab = params["tokens"], params["hidden"], params["vocab"]
        # float32 inputs and the unfused logits; the float64 reference's hidden states and blocks
        need = (tokens * hidden + hidden * vocab + tokens * vocab) * 4 + tokens * hidden * 8 + 4 * BLOCK_BYTES
        guard(need, f"linear_cross_entropy over {tokens} tokens × {vocab} logits")

    def input_shapes(self, params: Params) -> dict[str, tuple[int, ...]]:
        t, h, v = params["tokens"], params["hidden"], params["vocab"]
        return {"hidden": (t, h), "weight": (h, v), "targets": (t,)}

    def make_inputs(self, params: Params, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Hidden states uniform in [−1, 1), W scaled by 3/√hidden: logits of standard deviation about 1.7."""
        t, h, v = params["tokens"], params["hidden"], params["vocab"]
        x = rng.uniform(-1.0, 1.0, (t, h)).astype(dtype)
        w = (rng.uniform(-1.0, 1.0, (h, v)) * (3.0 / np.sqrt(h))).astype(dtype)
        return {"hidden": x, "weight": w, "targets": make_targets(t, v, rng)}

    @staticmethod
    def _logit_blocks(inputs: dict[str, np.ndarray]) -> Iterator[tuple[int, np.ndarray]]:
        """float64 logits a block of W's columns at a time (`blocked`): at a model's hidden and vocabulary neither
        the whole float64 logits nor a float64 W would fit."""
        h, w = inputs["hidden"].astype(np.float64), inputs["weight"]
        for first, stop in spans(w.shape[1], (h.shape[0] + h.shape[1]) * 8 * 2):
            yield first, h @ w[:, first:stop].astype(np.float64)

    def reference(self, inputs: dict[str, np.ndarray], params: Params) -> np.ndarray:
        return np.array([mean_loss_by_columns(self._logit_blocks(inputs), inputs["targets"])])

    def output_shape(self, params: Params) -> tuple[int, ...]:
        return (1,)

    def ledger(self, params: Params, dtype: str) -> dict[str, VariantLedger]:
        """The family's ledgers; the library's is the fused one at Liger's own chunk, after the zeroed gradient
        buffer its forward allocates (tokens × hidden) and its count of the counted tokens."""
        t, h, v, s = params["tokens"], params["hidden"], params["vocab"], np.dtype(dtype).itemsize
        out = linear_ce_ledger(t, h, v, params["chunk"], s)
        theirs = linear_ce_ledger(t, h, v, liger_chunk(t, h, v), s)["fused"]
        zeros = KernelTraffic("zeroed gradient buffer (unused)", 0, t * h * s, 0)
        count = KernelTraffic("count of counted tokens", t * TARGET_BYTES, TARGET_BYTES, t)
        out["library"] = VariantLedger(
            "library", (zeros, count, *theirs.kernels), peak_bytes=theirs.peak_bytes + t * h * s
        )
        return out

    def tolerance(self, inputs: dict[str, np.ndarray], params: Params, dtype: str, ref: np.ndarray) -> float:
        """Four times the error of logits rounded to `dtype` storage, at least what the GEMM's float32 sums of
        `hidden` products (√hidden ulps of Σ|h·w|, twice in lse − picked) and the row's sum may cost."""
        rounded = lambda z: z.astype(np.float32).astype(dtype).astype(np.float64)
        stored = ((first, rounded(z)) for first, z in self._logit_blocks(inputs))
        scale = max(abs(ref[0]), 1e-3)
        own = abs(mean_loss_by_columns(stored, inputs["targets"]) - ref[0]) / scale
        h, w = np.abs(inputs["hidden"].astype(np.float32)), inputs["weight"]
        widest = max(
            float((h @ np.abs(w[:, a:b].astype(np.float32))).max()) for a, b in spans(w.shape[1], 4 * h.shape[0])
        )
        gemm = 2 * np.sqrt(params["hidden"]) * 2.0**-24 * widest / scale
        reduction = 4 * 2.0**-24 * (np.sqrt(params["vocab"]) + np.sqrt(params["tokens"]))
        return self.limits.clip(dtype, max(4.0 * own, 4.0 * gemm + reduction))

    def emulation_params(self, params: Params, max_elements: int) -> Params:
        """Fewer tokens (at least two chunks where there were), hidden at most 64, the vocabulary within budget."""
        tokens, vocab, tile = params["tokens"], params["vocab"], params["tile"]
        if vocab > max_elements:
            vocab = max(max_elements - 1, min(tile, TILE_MAX) + 1)
        keep = max(1, min(tokens, max_elements // vocab))
        chunk = max(1, min(params["chunk"], keep // 2 or 1))
        return {**params, "tokens": keep, "hidden": min(params["hidden"], 64), "vocab": vocab, "chunk": chunk}
