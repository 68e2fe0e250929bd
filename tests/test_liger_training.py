"""Liger-Kernel's `library` rows in the backward and train phases, in Triton's interpreter.

Rope, cross-entropy and linear cross-entropy run there: their gradients (and, in train, their outputs) against
the float64 references on odd shapes with ignored tokens and KV heads fewer than heads, float32 and float16;
what each forward keeps (Liger's own saved tensors, and what the family's model says Liger's row keeps); and that
launching a row again gives the same answer, since Liger's backward kernels work in place. Its SwiGLU and fused
add + RMSNorm kernels cannot run in the interpreter and say so as `Unsupported`; a test here teaches the
interpreter the two things they need (below), so that the suite's direct launches of them, argument by argument,
are checked without a GPU too.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import phases, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey
from tests.support import missing
from tests.training_support import assert_close, run_phase

registry.discover()
scenarios.discover()
pytestmark = pytest.mark.skipif(bool(missing("liger_kernel", "torch")), reason=missing("liger_kernel", "torch"))
PHASES = (phases.BACKWARD, phases.TRAIN)


def _emulated() -> None:
    probe = targets.TARGETS[("liger", "cuda")].probe()
    if probe.mode != targets.EMULATED:
        pytest.skip(probe.reason)


def _saved_model(family: str, params: dict, dtype: str) -> dict[str, dict[str, int]]:
    scn = scenarios.get(family)
    return scn.training.saved(scn, params, dtype)


CE = ({"tokens": 9, "vocab": 1001, "tile": 256}, {"tokens": 7, "vocab": 3, "tile": 32})
"""Seed 0 ignores rows 1 and 7 of 9 and row 6 of 7 (tests/test_cross_entropy_backward.py)."""


@pytest.mark.emulated
@pytest.mark.parametrize("phase", PHASES)
def test_cross_entropy(phase: str) -> None:
    _emulated()
    for params, dtype in ((CE[0], "float32"), (CE[1], "float32"), (CE[0], "float16")):
        out, ref, tol, launch = run_phase("cross_entropy", "liger", "library", "cuda", phase, params, dtype)
        assert_close(out, ref, tol)
        s = np.dtype(dtype).itemsize
        # what LigerCrossEntropyFunction saves: the gradient, as the suite's fused variant
        assert dict(launch.saves) == {"dlogits": params["tokens"] * params["vocab"] * s}
        assert dict(launch.saves) == _saved_model("cross_entropy", params, dtype)["liger/library"]


ROPE = (
    {"batch": 2, "seq_len": 3, "heads": 3, "kv_heads": 1, "head_dim": 64, "pairing": "half"},
    {"batch": 1, "seq_len": 5, "heads": 4, "kv_heads": 2, "head_dim": 32, "pairing": "half"},
)
"""Heads not a power of two (Liger pads them to 4, masked) and KV heads fewer than heads; odd token counts."""


@pytest.mark.emulated
@pytest.mark.parametrize("phase", PHASES)
def test_rope(phase: str) -> None:
    _emulated()
    for params, dtype in ((ROPE[0], "float32"), (ROPE[1], "float32"), (ROPE[1], "float16")):
        out, ref, tol, launch = run_phase("rope", "liger", "library", "cuda", phase, params, dtype)
        assert_close(out, ref, tol)
        # cos and sin: Liger's rope keeps what the family's `library` entry says (the model has no Liger entry)
        model = _saved_model("rope", params, dtype)
        assert "liger/library" not in model and dict(launch.saves) == model["library"]


LCE = (
    {"tokens": 7, "hidden": 16, "vocab": 3, "chunk": 4, "tile": 32},
    {"tokens": 6, "hidden": 33, "vocab": 257, "chunk": 4, "tile": 64},
)
"""The family's first two checks: vocab 3 and 257, hidden 33 (odd); Liger picks its own chunk."""


@pytest.mark.emulated
@pytest.mark.parametrize("phase", PHASES)
def test_linear_cross_entropy(phase: str) -> None:
    _emulated()
    for params, dtype in ((LCE[0], "float32"), (LCE[1], "float32"), (LCE[1], "float16")):
        out, ref, tol, launch = run_phase("linear_cross_entropy", "liger", "library", "cuda", phase, params, dtype)
        assert_close(out, ref, tol)
        t, h, v, s = params["tokens"], params["hidden"], params["vocab"], np.dtype(dtype).itemsize
        # what LigerFusedLinearCrossEntropyFunction saves: both gradients, nothing of the vocabulary × tokens
        assert dict(launch.saves) == {"dhidden": t * h * s, "dweight": h * v * s}
        assert dict(launch.saves) == _saved_model("linear_cross_entropy", params, dtype)["liger/library"]


def _launched_three_times(family: str, phase: str, params: dict) -> list[dict[str, np.ndarray]]:
    """The entry built once on poisoned outputs, launched three times (publishing each): each launch's outputs."""
    scn = phases.phased(scenarios.get(family), phase)
    inputs = scn.make_inputs(params, "float32", np.random.default_rng(0))
    target = targets.TARGETS[("liger", "cuda")]
    dev = {name: target.asarray(np.array(a)) for name, a in inputs.items()}
    out = {name: target.empty(shape, "float32") for name, shape in scn.output_shape(params).items()}
    for buf in out.values():
        target.poison(buf)
    launch = registry.as_launch(registry.REGISTRY.get(KernelKey(family, "liger", "library", "cuda", phase))(
        dev, out, params, {}
    ))  # fmt: skip
    results = []
    for _ in range(3):
        launch.checked()
        results.append({name: target.to_host(buf).copy() for name, buf in out.items()})
    return results


@pytest.mark.emulated
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(
    ("family", "params"), [("cross_entropy", CE[1]), ("rope", ROPE[1]), ("linear_cross_entropy", LCE[0])]
)
def test_every_launch_the_same(family: str, params: dict, phase: str) -> None:
    """Liger's backward kernels scale or rotate in place: a launch that worked on what the last one wrote (the
    saved gradient scaled by dy again, dq rotated twice) would drift from launch to launch."""
    _emulated()
    first, *again = _launched_three_times(family, phase, params)
    for later in again:
        for name, value in first.items():
            assert np.array_equal(value, later[name]), f"{family} {phase}: {name} changed on a later launch"


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(("family", "params", "reason"), [
    ("swiglu", {"rows": 3, "cols": 64}, "interpreter"),
    ("add_rmsnorm", {"rows": 3, "cols": 64, "tile": 64}, "interpreter"),
    ("rope", {"batch": 1, "seq_len": 3, "heads": 2, "kv_heads": 2, "head_dim": 64, "pairing": "interleaved"},
     "half"),
])  # fmt: skip
def test_what_liger_cannot_run_here_is_unsupported_with_its_reason(
    family: str, params: dict, reason: str, phase: str
) -> None:
    _emulated()
    with pytest.raises(registry.Unsupported, match=reason):
        run_phase(family, "liger", "library", "cuda", phase, params, "float32")


if not missing("triton"):
    import triton
    import triton.language as tl

    @triton.jit
    def _rsqrt(x):
        """libdevice's rsqrt, which the interpreter lacks (a jit function sees triton.language as a global)."""
        return 1.0 / tl.sqrt(x)


@pytest.fixture
def taught_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's interpreter, for this test only, taught what Liger's SwiGLU and RMSNorm kernels need of a GPU: a
    float argument as a float32 scalar tensor (as a compiled launch passes it; the interpreter keeps a Python
    float, on which the kernels' `gate_multiplier.to(tl.float32)` and `eps.to(...)` fail), and libdevice's rsqrt
    (None there) as 1/sqrt. The rows' `Unsupported` guard is lifted for it."""
    import liger_kernel.ops.fused_add_rms_norm as liger_norm
    import triton.language as tl
    import triton.runtime.interpreter as interpreter

    import backends.liger.add_rmsnorm
    import backends.liger.add_rmsnorm_training
    import backends.liger.swiglu
    import backends.liger.swiglu_training

    convert = interpreter._implicit_cvt

    def float32_scalars(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    monkeypatch.setattr(interpreter, "_implicit_cvt", float32_scalars)
    monkeypatch.setattr(liger_norm, "rsqrt", _rsqrt)
    for module in (
        backends.liger.swiglu,
        backends.liger.swiglu_training,
        backends.liger.add_rmsnorm,
        backends.liger.add_rmsnorm_training,
    ):
        monkeypatch.setattr(module, "needs_gpu", lambda what: None)


@pytest.mark.emulated
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(("family", "params"), [
    ("swiglu", {"rows": 7, "cols": 193}),
    ("add_rmsnorm", {"rows": 7, "cols": 193, "tile": 64}),
])  # fmt: skip
def test_swiglu_and_add_rmsnorm_in_a_taught_interpreter(
    family: str, params: dict, phase: str, taught_interpreter: None
) -> None:
    """Both gradients (dresidual the copy of dx, published) and, in train, the output; what each keeps is the
    model's for Liger (a and b; h, rstd and γ, as the suite's fused variants). The RMSNorm backward runs as one
    program here (a CPU has no SMs to count), walking every row."""
    _emulated()
    for dtype in ("float32", "float16"):
        out, ref, tol, launch = run_phase(family, "liger", "library", "cuda", phase, params, dtype)
        assert_close(out, ref, tol)
        assert dict(launch.saves) == _saved_model(family, params, dtype)["liger/library"]
