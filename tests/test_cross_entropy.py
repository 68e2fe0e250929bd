"""The cross_entropy family: its ledger and peak memory against a hand count, ignored tokens, and its CUDA kernels
compiled for sm_90. Every kernel's numerics on the family's awkward `checks` run in tests/test_kernels.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scenarios.cross_entropy import IGNORE_INDEX, CrossEntropy
from suite.core import numerics, registry
from suite.core.registry import KernelKey
from tests.support import missing, nvrtc_reason, nvrtc_resources, run_without_emulation

registry.discover()
CE = CrossEntropy()
T, V = 5, 7
N = T * V


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    lg = CE.ledger({"tokens": T, "vocab": V, "tile": 32}, dtype)
    hand = [("log-softmax", N * s, N * s), ("gather −logp[target]", T * (8 + s), T * 4),
            ("mean over counted tokens", T * (4 + 8), s)]  # fmt: skip
    assert [(k.name, k.bytes_read, k.bytes_written) for k in lg["unfused"].kernels] == hand
    fused = lg["fused"]
    assert [(k.bytes_read, k.bytes_written) for k in fused.kernels] == [(N * s + T * 8, T * 4), (T * 12, s)]
    assert fused.saved_bytes == 2 * N * s
    held = N * s + T * 8 + s  # logits, targets, the loss
    assert fused.peak_bytes == held + T * 4  # the per-token losses
    assert lg["unfused"].peak_bytes == held + N * s + T * 4  # logp and the losses alive at the gather
    assert lg["library"].bytes_read == lg["compiled"].bytes_read == fused.bytes_read


def test_ignored_tokens_leave_the_mean() -> None:
    """The fused kernel's loss over mostly-ignored tokens equals the loss of the counted tokens alone, and counting
    the ignored ones would have been caught (the reference moves by far more than the tolerance)."""
    params = {"tokens": 9, "vocab": 301, "tile": 64}
    inputs = CE.make_inputs(params, "float32", np.random.default_rng(5))
    inputs["targets"][1:7] = IGNORE_INDEX
    ref = CE.reference(inputs, params)
    kept = {"logits": inputs["logits"][[0, 7, 8]], "targets": inputs["targets"][[0, 7, 8]]}
    assert np.isclose(CE.reference(kept, params | {"tokens": 3}), ref).all()
    out = np.full(1, np.nan, np.float32)
    registry.REGISTRY.get(KernelKey("cross_entropy", "numba", "fused", "cpu"))(inputs, out, params, {})()
    tol = CE.tolerance(inputs, params, "float32", ref)
    assert numerics.judge(out, ref, tol)[1] == ""
    counted = dict(inputs, targets=np.where(inputs["targets"] == IGNORE_INDEX, 0, inputs["targets"]))
    assert numerics.rel_err(CE.reference(counted, params), ref) > 100 * tol


def test_tolerance_grows_with_the_vocabulary_not_past_its_cap() -> None:
    small = CE.make_inputs({"tokens": 3, "vocab": 64, "tile": 64}, "float32", np.random.default_rng(1))
    big = CE.make_inputs({"tokens": 3, "vocab": 65536, "tile": 64}, "float32", np.random.default_rng(1))
    tol_small = CE.tolerance(small, {"tokens": 3, "vocab": 64}, "float32", CE.reference(small, {}))
    tol_big = CE.tolerance(big, {"tokens": 3, "vocab": 65536}, "float32", CE.reference(big, {}))
    assert 1e-5 <= tol_small < tol_big <= 1e-3


NUMBA_SCRIPT = """
import json
from backends.numba.on_cuda import cross_entropy
from backends.numba.compile import compile_kernels
out = {}
for dtype in ("float32", "float16"):
    for variant in ("fused", "unfused"):
        for name, ptx in compile_kernels(cross_entropy.kernel_sources(variant, dtype)).items():
            out[f"{dtype} {variant} {name}"] = ptx
print(json.dumps(out))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
def test_numba_cuda_kernels_compile_for_sm90() -> None:
    proc = run_without_emulation(NUMBA_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = json.loads(proc.stdout.splitlines()[-1])
    assert len(ptx) == 2 * (2 + 3)
    for name, code in ptx.items():
        assert ".target sm_90" in code and ".visible .entry" in code, name


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    from backends.cupy.build import compile_sm90
    from backends.cupy.cross_entropy import KERNELS, source

    for name in KERNELS:
        kernel = compile_sm90(*source(name, dtype))
        r = nvrtc_resources(kernel)
        assert kernel.cubin and r.registers > 0, kernel.log
        assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"


TRITON_SCRIPT = """
import json
from backends.triton import cross_entropy as tc
from backends.triton.launch import row_warps
from tests.sm90 import aligned, compile_sm90

def build(fn, signature, constexprs, warps):
    # pointers 16-byte aligned, and the vocabulary a multiple of 16 (32,000, 50,304, 128,256): what Triton's
    # launch specialises on for such a case
    attrs = aligned(i for i, (k, v) in enumerate(signature.items()) if v.startswith("*") or k == "vocab")
    k, log = compile_sm90(fn, signature, constexprs, {"num_warps": warps}, attrs)
    return k.asm["ptx"], log

for dt in ("fp32", "fp16", "bf16"):
    for tile in (2048, 16384):  # the M preset's tile, and the widest a program takes (16 warps)
        w = row_warps(tile, {})
        kernels = {
            "_ce_rows": (tc._ce_rows, {"x_ptr": f"*{dt}", "t_ptr": "*i64", "loss_ptr": "*fp32", "vocab": "i32",
                                       "TILE": "constexpr"}, {"TILE": tile}, w),
            "_log_softmax": (tc._log_softmax, {"x_ptr": f"*{dt}", "logp_ptr": f"*{dt}", "vocab": "i32",
                                               "TILE": "constexpr"}, {"TILE": tile}, w),
        }
        if tile == 2048:
            kernels["_gather"] = (tc._gather, {"logp_ptr": f"*{dt}", "t_ptr": "*i64", "loss_ptr": "*fp32",
                                               "tokens": "i32", "vocab": "i32", "BLOCK": "constexpr"},
                                  {"BLOCK": tc.MEAN_BLOCK}, w)
            kernels["_mean"] = (tc._mean, {"loss_ptr": "*fp32", "t_ptr": "*i64", "out_ptr": f"*{dt}",
                                           "tokens": "i32", "BLOCK": "constexpr"}, {"BLOCK": tc.MEAN_BLOCK}, w)
        for name, (fn, signature, constexprs, warps) in kernels.items():
            ptx, log = build(fn, signature, constexprs, warps)
            print(json.dumps({"kernel": f"{name} {dt} tile={tile}", "ptx": ptx, "ptxas": log}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_compile_for_sm90_without_spills() -> None:
    """Every Triton kernel of the family (linear_cross_entropy launches the same row and mean kernels) in float32,
    float16 and bfloat16, through ptxas: none may spill, and a 16-bit row is read as 16-bit values."""
    from suite.gpu.ptxas import parse_ptxas
    from tests.support import json_lines

    proc = run_without_emulation(TRITON_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 3 * (2 + 2 + 2)
    for row in rows:
        assert ".target sm_90" in row["ptx"], row["kernel"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"
        if row["kernel"].startswith(("_ce_rows", "_log_softmax")):  # a row read in 16-byte vectors, widened
            assert "ld.global.v4.b32" in row["ptx"] or "ld.global.v2.b32" in row["ptx"], row["kernel"]
            for dt, cvt in (("fp16", "cvt.f32.f16"), ("bf16", "cvt.f32.bf16")):
                assert (f" {dt} " in row["kernel"]) == (cvt in row["ptx"]), row["kernel"]
