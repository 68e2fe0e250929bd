"""Liger-Kernel's training-step kernels, as the suite's `library` train rows launch them, compile for sm_90 without a
GPU: the backward kernels (cross-entropy's and linear cross-entropy's `element_mul_kernel`, rope's `_triton_rope`
with BACKWARD_PASS, `_swiglu_backward_kernel`, `_fused_add_rms_norm_backward_kernel`) and cross-entropy's row
kernel with its gradient on, which no forward row launches.

As tests/test_liger_compile.py does for the forward rows: a subprocess without the interpreter builds each train
row on CPU tensors at Llama-3-8B's shapes, records every `kernel[grid](...)` call instead of running it, and
compiles the recorded call for GPUTarget("cuda", 90) (ptxas for sm_90a), in float32 and bfloat16 (Liger's
kernels compute in bfloat16 where the interpreter cannot follow; float16 takes the same code paths). SwiGLU's and
RMSNorm's backward kernels cannot run in the interpreter: this is their only check without a GPU. The RMSNorm
backward is built for one program (a CPU has no SMs to count), so its `rows_per_program` constexpr is the row
count here, not the H100's rows/132: the same code, specialised on another trip count.
"""

from __future__ import annotations

import pytest

from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, run_without_emulation

SCRIPT = """
import inspect, json
import numpy as np, torch
from suite.core import phases, registry, scenario as scenarios
from suite.core.registry import KernelKey
from backends.torch.bridge import to_torch, torch_dtype
from tests.sm90 import compile_sm90

registry.discover()
scenarios.discover()
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
         torch.int32: "i32"}
CE = "liger_kernel.ops.cross_entropy"
UTILS = "liger_kernel.ops.utils"
LCE = "liger_kernel.ops.fused_linear_cross_entropy"
ROPE = "liger_kernel.ops.rope"
SWIGLU = "liger_kernel.ops.swiglu"
NORM = "liger_kernel.ops.fused_add_rms_norm"
FAMILIES = {
    # family: (params, kernels its train row launches, those compiled here)
    "cross_entropy": ({"tokens": 3, "vocab": 128256, "tile": 2048},
                      [(CE, "liger_cross_entropy_kernel"), (UTILS, "element_mul_kernel")],
                      [(CE, "liger_cross_entropy_kernel"), (UTILS, "element_mul_kernel")]),
    "linear_cross_entropy": ({"tokens": 3, "hidden": 64, "vocab": 300, "chunk": 4, "tile": 64},
                             [(LCE, "liger_cross_entropy_kernel"), (LCE, "element_mul_kernel")],
                             [(LCE, "element_mul_kernel")]),
    "rope": ({"batch": 1, "seq_len": 3, "heads": 32, "kv_heads": 8, "head_dim": 128, "pairing": "half"},
             [(ROPE, "_triton_rope")], [(ROPE, "_triton_rope")]),
    "swiglu": ({"rows": 3, "cols": 14336},
               [(SWIGLU, "_swiglu_forward_kernel"), (SWIGLU, "_swiglu_backward_kernel")],
               [(SWIGLU, "_swiglu_backward_kernel")]),
    "add_rmsnorm": ({"rows": 3, "cols": 4096, "tile": 4096},
                    [(NORM, "_fused_add_rms_norm_forward_kernel"), (NORM, "_fused_add_rms_norm_backward_kernel")],
                    [(NORM, "_fused_add_rms_norm_backward_kernel")]),
}


def kind(value):
    if isinstance(value, torch.Tensor):
        return "*" + TYPES[value.dtype]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return "constexpr"
    if isinstance(value, int):
        return "i32" if abs(value) < 2**31 else "i64"
    return "fp32"


class Recorder:
    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, args, kwargs))


for family, (params, launched, compiled) in FAMILIES.items():
    recorders = {}
    for module, name in launched:
        mod = __import__(module, fromlist=[name])
        recorders[(module, name)] = Recorder(getattr(mod, name))
        setattr(mod, name, recorders[(module, name)])
    scn = phases.phased(scenarios.SCENARIOS[family], phases.TRAIN)
    for dtype in ("float32", "bfloat16"):
        inputs = {k: to_torch(v) for k, v in scn.make_inputs(params, dtype, np.random.default_rng(7)).items()}
        out = {k: torch.zeros(shape, dtype=torch_dtype(dtype)) for k, shape in scn.output_shape(params).items()}
        for r in recorders.values():
            r.calls.clear()
        entry = registry.REGISTRY.get(KernelKey(family, "liger", "library", "cuda", phases.TRAIN))
        registry.as_launch(entry(inputs, out, params, {"stream": None})).run()
        for key in compiled:
            recorder = recorders[key]
            for grid, args, kwargs in recorder.calls[-2:]:  # linear cross-entropy's two scalings
                if kwargs.get("BACKWARD_PASS") is False:
                    continue  # rope's forward: tests/test_liger_compile.py compiles it
                options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
                bound = inspect.signature(recorder.fn.fn).bind(*args, **kwargs)
                bound.apply_defaults()
                const = {p.name: bound.arguments[p.name] for p in recorder.fn.params
                         if p.is_constexpr or kind(bound.arguments[p.name]) == "constexpr"}
                signature = {k: ("constexpr" if k in const else kind(v)) for k, v in bound.arguments.items()}
                k, log = compile_sm90(recorder.fn, signature, const, options)
                name = "/".join(str(const[c]) for c in ("BACKWARD_PASS", "HAS_GRADIENTS", "X_col_stride")
                                if c in const)
                print(json.dumps({"kernel": f"{family} {key[1]}" + (f" {name}" if name else "") + f" {dtype}",
                                  "grid": list(grid), "warps": options.get("num_warps", 4), "ptx": k.asm["ptx"],
                                  "ptxas": log, "const": {c: str(v) for c, v in const.items()}}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch", "liger_kernel")), reason=missing("triton", "torch", "liger_kernel"))
def test_liger_training_kernels_compile_for_sm90_as_launched() -> None:
    proc = run_without_emulation(SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = {r["kernel"]: r for r in json_lines(proc.stdout)}
    kernels = (
        "cross_entropy liger_cross_entropy_kernel True",
        "cross_entropy element_mul_kernel 1",
        "linear_cross_entropy element_mul_kernel 1",
        "linear_cross_entropy element_mul_kernel 300",
        "rope _triton_rope True",
        "swiglu _swiglu_backward_kernel",
        "add_rmsnorm _fused_add_rms_norm_backward_kernel",
    )
    assert sorted(rows) == sorted(f"{k} {d}" for k in kernels for d in ("float32", "bfloat16"))
    for name, row in rows.items():
        assert ".target sm_90" in row["ptx"], name
        (resources,) = parse_ptxas(row["ptxas"]).values()
        # Liger's own kernels at its own settings: a few spilled words at most (its cross-entropy row kernel with
        # the gradient on spills 4 B in float32 and 44 B in bfloat16 at vocab 128,256 and 32 warps, its SwiGLU
        # backward 12 B in float32 at 14,336 columns); more would mean a launch setting gone wrong
        assert 0 < resources.registers <= 255 and resources.spill_store_bytes <= 64, f"{name}: {resources}"
    # one program per token (row, or the weight's vocabulary rows for dW), at the warps Liger picks on Hopper
    for dtype in ("float32", "bfloat16"):
        assert rows[f"cross_entropy liger_cross_entropy_kernel True {dtype}"]["grid"] == [3]
        assert rows[f"cross_entropy element_mul_kernel 1 {dtype}"]["warps"] == 32
        assert rows[f"linear_cross_entropy element_mul_kernel 1 {dtype}"]["grid"] == [3]
        assert rows[f"linear_cross_entropy element_mul_kernel 300 {dtype}"]["grid"] == [300]
        assert rows[f"rope _triton_rope True {dtype}"]["grid"] == [3]
        assert rows[f"swiglu _swiglu_backward_kernel {dtype}"]["warps"] == 16
        assert rows[f"add_rmsnorm _fused_add_rms_norm_backward_kernel {dtype}"]["grid"] == [1]  # SMs: 1 on a CPU
