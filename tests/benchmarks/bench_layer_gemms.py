"""The decoder layer's seven projections on the CPU through NumPy's BLAS, which the composed layer calls, and torch's,
which its eager and compiled rivals call: how much of the gap between the fused layer and torch's is the GEMMs.

The composed layer's variants differ only in their fusable ops; every one of them multiplies with NumPy
(`np.matmul(a, w, out=)`, backends/numba/on_cpu/decoder_layer.py), torch's layer with `@`. Timing the same
GEMMs both ways, at the shapes `scenarios.decoder_layer.chain.gemms` lists, says what the library alone costs.

    nox -s benchmark -- tests/benchmarks/bench_layer_gemms.py --benchmark-group-by=group

Cases: SmolLM2-135M's widths at 2,048 tokens and Llama-3-8B's at 128 (conf/model/), float32. Each benchmark is a
plain pytest-benchmark loop; compare the medians of one run, on a quiet host.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scenarios.decoder_layer.chain import gemms

MODELS = {
    "smollm2_135m, 2,048 tokens": {"tokens": 2048, "hidden": 576, "heads": 9, "kv_heads": 3, "head_dim": 64},
    "llama3_8b, 128 tokens": {"tokens": 128, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128},
}
INTERMEDIATE = {"smollm2_135m, 2,048 tokens": 1536, "llama3_8b, 128 tokens": 14336}
LIBRARIES = ("numpy", "torch")


def _gemms(case: str, library: str) -> Callable[[], None]:
    """One launcher running the layer's seven projections of `case` with `library`, on buffers made once."""
    rng = np.random.default_rng(20261206)
    params = {**MODELS[case], "intermediate": INTERMEDIATE[case]}
    operands = [
        (rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
        for _, m, n, k in gemms(params)
    ]
    outs = [np.empty((a.shape[0], w.shape[1]), np.float32) for a, w in operands]
    if library == "numpy":

        def run() -> None:
            for (a, w), out in zip(operands, outs, strict=True):
                np.matmul(a, w, out=out)

        return run
    torch = pytest.importorskip("torch")
    pairs = zip(operands, outs, strict=True)
    tensors = [(torch.from_numpy(a), torch.from_numpy(w), torch.from_numpy(o)) for (a, w), o in pairs]

    def run_torch() -> None:
        for a, w, out in tensors:
            torch.matmul(a, w, out=out)

    return run_torch


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("case", list(MODELS))
def test_gemms(benchmark, case: str, library: str) -> None:
    run = _gemms(case, library)
    benchmark.group = f"decoder layer's projections, {case}, float32"
    run()  # warm: touched, the libraries' threads started
    benchmark.pedantic(run, rounds=9, warmup_rounds=1, iterations=1)
