"""The rope family: its ledger against a hand count, its fused kernels held to every element's own rounding, the
checks and presets it refuses, and its CUDA kernels compiled for sm_90.

Every kernel's numerics on the family's awkward `checks` (odd token counts, key heads fewer than query heads,
head_dim 64 and 128, both pairings) run in tests/test_kernels.py, emulated CUDA targets included.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from scenarios.rope import Rope
from suite.core import registry, targets
from suite.core.errors import ConfigError
from suite.core.registry import KernelKey
from tests.support import missing, nvrtc_reason, nvrtc_resources, run_without_emulation

registry.discover()
ROPE = Rope()
P = {"batch": 2, "seq_len": 3, "heads": 4, "kv_heads": 2, "head_dim": 8, "pairing": "half"}
NQ, NK, T = 2 * 3 * 4 * 8, 2 * 3 * 2 * 8, 3 * 4
"""Elements of q (96), of k (48) and of one table (12)."""


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_ledger_matches_a_hand_count(dtype: str, s: int) -> None:
    lg = ROPE.ledger(P, dtype)
    hand = []
    for x, n in (("q", NQ), ("k", NK)):
        hand += [
            (f"rotate ({x})", n * s, n * s, n // 2),
            (f"x·cos ({x})", (n + T) * s, n * s, n),
            (f"rotate(x)·sin ({x})", (n + T) * s, n * s, n),
            (f"add ({x})", 2 * n * s, n * s, n),
        ]
    assert [(k.name, k.bytes_read, k.bytes_written, k.flops) for k in lg["unfused"].kernels] == hand
    fused = lg["fused"]
    assert (fused.bytes_read, fused.bytes_written, fused.launches) == ((NQ + NK + 2 * T) * s, (NQ + NK) * s, 1)
    assert fused.flops == lg["unfused"].flops == int(3.5 * (NQ + NK))
    assert fused.saved_bytes == 3 * 2 * (NQ + NK) * s  # r, a and b of q and of k, each written once and read once
    held = (2 * (NQ + NK) + 2 * T) * s  # q, k, out, cos, sin
    assert fused.peak_bytes == held
    assert lg["unfused"].peak_bytes == held + 3 * NQ * s  # r, a, b of q alive at once (before the add)
    assert lg["eager"].kernels == lg["unfused"].kernels and lg["compiled"].bytes_read == fused.bytes_read
    library = lg["library"]  # Liger's in-place kernel after a copy of q and k into out
    assert [(k.bytes_read, k.bytes_written) for k in library.kernels] == [
        ((NQ + NK) * s, (NQ + NK) * s),
        ((NQ + NK + 2 * T) * s, (NQ + NK) * s),
    ]
    assert library.peak_bytes == held and library.flops == fused.flops


def test_reference_is_the_rotation_of_each_pair() -> None:
    """Rotating by the angle and back is the identity, and each pair keeps its length."""
    for pairing in ("half", "interleaved"):
        params = P | {"pairing": pairing}
        inputs = ROPE.make_inputs(params, "float32", np.random.default_rng(3))
        out = ROPE.reference(inputs, params)
        back = ROPE.reference({"q": out[:, :, :4], "k": out[:, :, 4:], "cos": inputs["cos"],
                               "sin": -inputs["sin"].astype(np.float64)}, params)  # fmt: skip
        x = np.concatenate([inputs["q"], inputs["k"]], axis=2).astype(np.float64)
        assert np.allclose(back, x, rtol=0, atol=1e-5)  # cos² + sin² = 1 to float32 rounding
        assert not np.allclose(out, x, atol=0.1)  # it did rotate


@pytest.mark.parametrize("bad", [{"head_dim": 7}, {"head_dim": 258}, {"kv_heads": 3}, {"pairing": "odd"},
                                 {"batch": 0}])  # fmt: skip
def test_impossible_cases_are_refused(bad: dict) -> None:
    with pytest.raises(ConfigError):
        ROPE.check(P | bad)


def test_emulation_slice_keeps_the_heads() -> None:
    big = ROPE.emulation_params(P | {"batch": 4, "seq_len": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128}, 4096)
    assert (big["batch"], big["seq_len"], big["heads"], big["head_dim"]) == (1, 1, 32, 128)


FUSED = [("numba", "cpu"), ("triton", "cuda"), ("numba", "cuda")]


@pytest.mark.parametrize(("backend", "device"), FUSED)
def test_fused_half_precision_rounds_once_per_element(backend: str, device: str) -> None:
    """A fused kernel computes each output in float32 and rounds it once to float16: every element is within one
    half-precision rounding of its own value (plus float32's of the two products), a bound the scenario's
    tolerance (set by the unfused steps, which round twice more) cannot give element by element."""
    variant = "compiled" if backend == "torch" else "fused"
    params = {"batch": 1, "seq_len": 5, "heads": 3, "kv_heads": 1, "head_dim": 64}
    target = targets.TARGETS[(backend, device)]
    if target.probe().mode == targets.UNAVAILABLE:
        pytest.skip(target.probe().reason)
    for pairing in ("half", "interleaved"):
        case = params | {"pairing": pairing}
        inputs = ROPE.make_inputs(case, "float16", np.random.default_rng(11))
        ref = ROPE.reference(inputs, case)
        out = target.empty(ROPE.output_shape(case), "float16")
        target.poison(out)
        entry = registry.REGISTRY.get(KernelKey("rope", backend, variant, device))
        entry({k: target.asarray(v) for k, v in inputs.items()}, out, case, {"stream": None})()
        target.synchronize()
        got = np.asarray(target.to_host(out)).astype(np.float64)
        x = np.concatenate([inputs["q"], inputs["k"]], axis=2).astype(np.float64)
        bound = np.abs(ref) * 2.0**-11 + np.abs(x).max() * 2.0**-22
        assert np.all(np.abs(got - ref) <= bound), (pairing, float(np.max(np.abs(got - ref) - bound)))


NUMBA_SCRIPT = """
import json, sys
from backends.numba.on_cuda import rope
from backends.numba.compile import compile_kernels
out = {}
for pairing in ("half", "interleaved"):
    for variant in ("fused", "unfused"):
        for name, ptx in compile_kernels(rope.kernel_sources(variant, {"pairing": pairing}, sys.argv[1])).items():
            out[f"{pairing} {name}"] = ptx
print(json.dumps(out))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("numba_cuda")), reason=missing("numba_cuda"))
def test_numba_cuda_kernels_compile_for_sm90() -> None:
    proc = run_without_emulation(NUMBA_SCRIPT, "float16")
    assert proc.returncode == 0, proc.stderr[-4000:]
    ptx = json.loads(proc.stdout.splitlines()[-1])
    assert len(ptx) == 2 * (1 + 4)
    for name, code in ptx.items():
        assert ".target sm_90" in code and ".visible .entry" in code, name
        assert "cvt.f32.f16" in code and "cvt.rn.f16.f32" in code, f"{name}: no float16 conversions"


@pytest.mark.compile
@pytest.mark.skipif(bool(nvrtc_reason()), reason=nvrtc_reason())
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cupy_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    from backends.cupy.build import compile_sm90
    from backends.cupy.rope import fused_source, step_source

    for pairing in ("half", "interleaved"):
        for source in [fused_source(pairing, dtype)] + [step_source(op, pairing, dtype) for op in ("rotate", "mul_cos",
                                                                                                  "add")]:  # fmt: skip
            kernel = compile_sm90(*source)
            r = nvrtc_resources(kernel)
            assert kernel.cubin and r.registers > 0, kernel.log
            assert r.spill_bytes == 0 and r.stack_bytes == 0, f"{kernel.name}: {kernel.log}"


TRITON_SCRIPT = """
import json
from backends.triton import rope as tr
from tests.sm90 import aligned, compile_sm90

def build(fn, dtype, const):
    pointers = [a for a in fn.arg_names if a.endswith("_ptr")]
    signature = {a: f"*{dtype}" for a in pointers}
    signature |= {a: "i32" for a in fn.arg_names if a not in pointers and a not in const}
    signature |= {c: "constexpr" for c in const}
    return compile_sm90(fn, signature, const, {"num_warps": 1}, aligned(range(len(pointers))))

for pair in (0, 1):
    for dtype in ("fp32", "fp16", "bf16"):
        k, log = build(tr._rope_fused, dtype, {"PAIR": pair, "HALF": 64})
        print(json.dumps({"kernel": f"fused {pair} {dtype}", "ptx": k.asm["ptx"], "ptxas": log}))
        for op in (tr.ROTATE, tr.MUL, tr.ADD):
            k, log = build(tr._rope_step, dtype, {"OP": op, "PAIR": pair, "HALF": 64})
            print(json.dumps({"kernel": f"step {op} {pair} {dtype}", "ptx": k.asm["ptx"], "ptxas": log}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_compile_for_sm90_without_spills() -> None:
    from suite.gpu.ptxas import parse_ptxas
    from tests.support import json_lines

    proc = run_without_emulation(TRITON_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 2 * 3 * 4  # pairings × float32, float16, bfloat16 × (fused + 3 steps)
    for row in rows:
        assert ".target sm_90" in row["ptx"], row["kernel"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"
