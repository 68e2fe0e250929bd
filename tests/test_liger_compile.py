"""Liger-Kernel's four library rows compile for sm_90 (H100/H200) without a GPU, launched as the suite launches them.

The rows call Liger's kernels directly, with arguments and constexprs of Liger's private signatures: a release
that renames one, or a launch that passes a wrong type, would first show on a GPU. So a subprocess without the
interpreter builds each row's entry on CPU tensors at a model's shapes (Llama-3-8B: hidden 4096, intermediate
14336, 32 query and 8 key heads of 128, vocabulary 128,256), records the `kernel[grid](...)` call its launcher
makes instead of running it, and compiles that call for GPUTarget("cuda", 90) through `triton.compile`, its PTX
assembled by ptxas: every argument's type from the value the launcher passed, constexprs and num_warps as passed;
in float32, float16 and bfloat16 (Liger's kernels that compute in bfloat16 itself are checked here only: the
interpreter does that arithmetic on the bit patterns).
"""

from __future__ import annotations

import pytest

from suite.gpu.ptxas import parse_ptxas
from tests.support import json_lines, missing, run_without_emulation

SCRIPT = """
import inspect, json
import numpy as np, torch
from suite.core import registry, scenario as scenarios
from suite.core.registry import KernelKey
from backends.torch.bridge import to_torch, torch_dtype
from tests.sm90 import compile_sm90

registry.discover()
scenarios.discover()
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
         torch.int32: "i32"}
CASES = {
    ("liger_kernel.ops.fused_add_rms_norm", "_fused_add_rms_norm_forward_kernel"):
        ("add_rmsnorm", {"rows": 3, "cols": 4096, "tile": 4096}),
    ("liger_kernel.ops.swiglu", "_swiglu_forward_kernel"): ("swiglu", {"rows": 3, "cols": 14336}),
    ("liger_kernel.ops.rope", "_triton_rope"):
        ("rope", {"batch": 1, "seq_len": 3, "heads": 32, "kv_heads": 8, "head_dim": 128, "pairing": "half"}),
    ("liger_kernel.ops.cross_entropy", "liger_cross_entropy_kernel"):
        ("cross_entropy", {"tokens": 3, "vocab": 128256, "tile": 2048}),
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


for (module, name), (family, params) in CASES.items():
    mod = __import__(module, fromlist=[name])
    fn = getattr(mod, name)
    recorder = Recorder(fn)
    setattr(mod, name, recorder)
    scn = scenarios.SCENARIOS[family]
    for dtype in ("float32", "float16", "bfloat16"):
        inputs = scn.make_inputs(params, dtype, np.random.default_rng(7))
        tensors = {k: to_torch(v) for k, v in inputs.items()}
        out = torch.empty(scn.output_shape(params), dtype=torch_dtype(dtype))
        registry.REGISTRY.get(KernelKey(family, "liger", "library", "cuda"))(tensors, out, params, {"stream": None})()
        (grid, args, kwargs), = recorder.calls[-1:]
        options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
        bound = inspect.signature(fn.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        const = {p.name: bound.arguments[p.name] for p in fn.params
                 if p.is_constexpr or kind(bound.arguments[p.name]) == "constexpr"}
        signature = {k: ("constexpr" if k in const else kind(v)) for k, v in bound.arguments.items()}
        k, log = compile_sm90(fn, signature, const, options)
        print(json.dumps({"kernel": f"{family} {dtype}", "grid": list(grid), "warps": options.get("num_warps", 4),
                          "ptx": k.asm["ptx"], "ptxas": log}))
"""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch", "liger_kernel")), reason=missing("triton", "torch", "liger_kernel"))
def test_liger_rows_compile_for_sm90_as_launched() -> None:
    proc = run_without_emulation(SCRIPT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = {r["kernel"]: r for r in json_lines(proc.stdout)}
    families = ("add_rmsnorm", "swiglu", "rope", "cross_entropy")
    assert sorted(rows) == sorted(f"{f} {d}" for f in families for d in ("float32", "float16", "bfloat16"))
    for name, row in rows.items():
        assert ".target sm_90" in row["ptx"], name
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{name}: {resources}"
    # one program per row or token, at the warps Liger picks on Hopper
    assert rows["rope float32"]["grid"] == [3] and rows["cross_entropy float16"]["grid"] == [3]
    assert rows["cross_entropy float32"]["warps"] == 32 and rows["swiglu float16"]["warps"] == 16
    assert rows["rope bfloat16"]["grid"] == [3] and rows["cross_entropy bfloat16"]["grid"] == [3]
    assert rows["cross_entropy bfloat16"]["warps"] == 32 and rows["swiglu bfloat16"]["warps"] == 16
    assert ".param .u64" in rows["cross_entropy float32"]["ptx"]  # the logits, targets and losses are pointers
