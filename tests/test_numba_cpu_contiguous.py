"""Every Numba CPU kernel reads and writes its rows as contiguous vectors: no gather, no scatter.

Numba wraps a negative index around, so `a[i0 + i]` with an offset LLVM cannot prove positive becomes a select
per element, and the vectoriser then gathers and scatters instead of loading and storing whole vectors: the
unfused attention steps ran 4.8× slower for it, which made fusion look 8× better than unfused instead of 1.7×,
and the fused matmul epilogue cost three times a separate pass. Kernels index slices from 0 instead; this test
runs every registered Numba CPU entry once per dtype and reads the machine code of every kernel it compiled.
"""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest
from llvmlite import binding
from numba.core.registry import CPUDispatcher

from suite.core import phases, registry, targets
from suite.core import scenario as scenarios
from suite.run import outputs

registry.discover()
scenarios.discover()

GATHER = re.compile(r"\bv(?:p?gather|p?scatter)\w*")
GATHERS_BY_DESIGN = {"backends.numba.on_cpu.cross_entropy.gather"}
"""Kernels whose operation is a gather: cross-entropy's unfused step picks one logit per row, `logp[t, target[t]]`,
so a vector gather is the best code for it, not a lost contiguous load."""


def _kernels_of(module_prefix: str) -> dict[str, str]:
    """name -> machine code of every compiled signature of the Numba CPU kernels defined under the prefix
    (`type(...) is`, not isinstance: the heap holds weak proxies whose referents may be gone)."""
    found = {}
    for obj in gc.get_objects():
        if type(obj) is CPUDispatcher and (obj.py_func.__module__ or "").startswith(module_prefix):
            for sig in obj.signatures:
                found[f"{obj.py_func.__module__}.{obj.py_func.__name__}{sig}"] = obj.inspect_asm(sig)
    return found


@pytest.mark.skipif(not binding.get_host_cpu_features().get("avx2"), reason="gathers need AVX2: nothing to check")
def test_no_numba_cpu_kernel_gathers_or_scatters() -> None:
    target = targets.TARGETS[("numba", "cpu")]
    keys = [k for k in registry.REGISTRY.keys(backend="numba", device="cpu") if k.scenario in scenarios.SCENARIOS]
    for key in (k for k in keys if k.phase != "train"):  # a backward's kernels scanned too; train runs both again
        scn = phases.phased(scenarios.SCENARIOS[key.scenario], key.phase)
        for dtype in (d for d in scn.dtypes if not target.dtype_refusal(d)):  # bfloat16: no Numba kernel to scan
            params = scn.checks[0]
            inputs = scn.make_inputs(params, dtype, np.random.default_rng(0))
            out = outputs.empty(target, scn.output_shape(params), dtype)
            try:
                launch = registry.REGISTRY.get(key)(inputs, out, params, {})
            except registry.Unsupported:
                continue  # no kernel for this dtype: nothing compiled to judge
            launch()
    kernels = _kernels_of("backends.numba.on_cpu")
    assert len(kernels) >= 10  # the scan sees the kernels it should judge
    offenders = {name: len(GATHER.findall(asm)) for name, asm in kernels.items()
                 if GATHER.search(asm) and name.split("(")[0] not in GATHERS_BY_DESIGN}  # fmt: skip
    assert not offenders, offenders
