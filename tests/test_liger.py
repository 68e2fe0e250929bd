"""Liger-Kernel's library rows in Triton's interpreter: what the generic numerics test cannot see.

Liger's cross-entropy kernel zeroes the logits of ignored tokens in place, and its rope rotates q and k in place;
the rows must leave the suite's inputs as they were and give the same answer on every call. Its RMSNorm and
SwiGLU kernels cannot run in the interpreter and say so as `Unsupported` rather than failing.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey
from tests.support import missing

registry.discover()
scenarios.discover()
pytestmark = pytest.mark.skipif(bool(missing("liger_kernel", "torch")), reason=missing("liger_kernel", "torch"))


def _build(family: str, params: dict, dtype: str = "float32", seed: int = 11):
    target = targets.TARGETS[("liger", "cuda")]
    if target.probe().mode != targets.EMULATED:
        pytest.skip(target.probe().reason)
    scn = scenarios.SCENARIOS[family]
    host = scn.make_inputs(params, dtype, np.random.default_rng(seed))
    inputs = {k: target.asarray(v.copy()) for k, v in host.items()}  # host stays the untouched original
    out = target.empty(scn.output_shape(params), dtype)
    target.poison(out)
    launch = registry.REGISTRY.get(KernelKey(family, "liger", "library", "cuda"))(inputs, out, params, {})
    return scn, host, inputs, out, launch


@pytest.mark.emulated
@pytest.mark.parametrize(("family", "params"), [
    ("cross_entropy", {"tokens": 17, "vocab": 300, "tile": 256}),
    ("rope", {"batch": 1, "seq_len": 5, "heads": 4, "kv_heads": 2, "head_dim": 64, "pairing": "half"}),
    ("linear_cross_entropy", {"tokens": 17, "hidden": 8, "vocab": 300, "chunk": 4, "tile": 256}),
])  # fmt: skip
def test_inputs_unchanged_and_every_call_the_same(family: str, params: dict) -> None:
    scn, host, inputs, out, launch = _build(family, params)
    if "cross_entropy" in family:
        assert (host["targets"] == -100).any()  # an ignored token, whose logits Liger's kernel would zero
    ref = scn.reference(host, params)
    results = []
    for _ in range(2):
        launch()
        results.append(out.numpy().copy())
    for name, value in inputs.items():
        assert np.array_equal(value.numpy(), host[name]), f"{family}: the row changed its input '{name}'"
    _err, problem = numerics.judge(results[0], ref, scn.tolerance(host, params, "float32", ref))
    assert problem == "" and np.array_equal(results[0], results[1])


@pytest.mark.parametrize(("family", "params", "reason"), [
    ("rope", {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 2, "head_dim": 64, "pairing": "interleaved"},
     "half"),
    ("swiglu", {"rows": 3, "cols": 64}, "interpreter"),
    ("add_rmsnorm", {"rows": 3, "cols": 64, "tile": 64}, "interpreter"),
])  # fmt: skip
def test_what_liger_cannot_run_here_is_unsupported_with_its_reason(family: str, params: dict, reason: str) -> None:
    with pytest.raises(registry.Unsupported, match=reason):
        _build(family, params)
