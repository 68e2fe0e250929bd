"""decoder_layer's Liger row: registered as the family's `library` on CUDA and counted; where it cannot run, one row
that says why in one line; and in its model code, Liger's launches where Liger has a kernel, on the tensors the
layer means. Liger's kernels run on a GPU only, so the wiring is checked here with stand-ins for the three
launches that compute what Liger's kernels compute, in torch on the CPU, and the layer held to the float64 chain;
the launches the layer makes are compiled for sm_90 as made; and on a GPU (`nox -s gpu`) the row runs for real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scenarios.normalization import EPS
from suite.core import numerics, registry, targets
from suite.core import scenario as scenarios
from suite.core.registry import KernelKey
from tests.conftest import make_config
from tests.support import json_lines, missing, run_without_emulation

registry.discover()
LAYER = scenarios.get("decoder_layer")
SMALL = {k: v[0] for k, v in LAYER.presets["S"].items()}
KEY = KernelKey("decoder_layer", "liger", "library", "cuda")
needs_triton = pytest.mark.skipif(bool(missing("triton")), reason=missing("triton"))
"""Where Triton is missing the Liger package does not load and nothing of it registers."""
needs_liger = pytest.mark.skipif(bool(missing("liger_kernel", "triton")), reason=missing("liger_kernel", "triton"))


@needs_triton
def test_registered_as_the_familys_library_on_cuda_and_counted_as_eager_with_ligers_ops() -> None:
    assert registry.REGISTRY.get(KEY) is not None and "library" in LAYER.variants
    ledger = LAYER.ledger(SMALL, "float32")
    eager, liger, compiled = ({k.name for k in ledger[v].kernels} for v in ("eager", "library", "compiled"))
    # eager's code with Liger's ops: its GEMMs, copies and SDPA; the one-kernel norms, rope and SiLU·mul
    assert liger - eager == {"add_rmsnorm (input): add_rmsnorm (fused)", "rope: rope q and k (fused)",
                             "add_rmsnorm (post-attention): add_rmsnorm (fused)", "swiglu: swiglu (library)"}  # fmt: skip
    assert liger - compiled == {"attention: sdpa", "swiglu: swiglu (library)"}
    assert ledger["library"].bytes_moved() < ledger["eager"].bytes_moved()


@needs_liger
@pytest.mark.parametrize(
    ("here", "reason"),
    [
        ("no GPU", "no CUDA GPU: Liger's Triton kernels run on a GPU only"),
        ("no Liger", "liger-kernel is not installed"),
        ("interpreter", "RMSNorm kernel casts a scalar argument in-kernel"),
    ],
)
def test_where_it_cannot_run_its_row_is_skipped_saying_why_in_one_line(
    here: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import backends.liger as liger

    if here == "interpreter" and not liger.interpreting():
        pytest.skip("Triton's interpreter is off here (a GPU run): the row runs")
    if here != "interpreter":
        monkeypatch.setattr(liger, "interpreting", lambda: False)
        monkeypatch.setattr(liger.torch.cuda, "is_available", lambda: False)
    if here == "no Liger":
        found = liger.importlib.util.find_spec
        monkeypatch.setattr(liger.importlib.util, "find_spec", lambda n: None if n == "liger_kernel" else found(n))
    from suite.run.runner import run

    cfg = make_config("scenario=decoder_layer", "preset=S", "backends=[liger]", "dtype=float32", "timing=quick",
                      "isolate=false", "scenario.rope_pairing=[half]")  # fmt: skip
    rows = run(cfg, tmp_path, show_progress=False).table
    mine = rows[rows["backend"] == "liger"]
    assert len(mine) == 1 and set(mine["variant"]) == {"library"} and set(mine["device"]) == {"cuda"}
    (row,) = mine.itertuples()
    assert row.status == "skipped" and reason in row.reason and "\n" not in row.reason
    assert row.time_ms != row.time_ms  # nothing timed


class StandIns:
    """Liger's three launches as the layer builds them, each computing what its kernel computes, in torch; every
    call recorded with what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def add_norm(self, inputs: dict, out: Any, rstd: torch.Tensor, opts: dict):
        h, y = out[0], out[1]
        self.calls.append(("add_rmsnorm", {"x": inputs["x"], "h": h, "y": y, "rstd": rstd}))

        def launch() -> None:
            torch.add(inputs["x"], inputs["residual"], out=h)
            y.copy_(F.rms_norm(h, (h.shape[-1],), inputs["weight"], EPS))

        return launch

    def rotation(self, q: torch.Tensor, q_stride: int, k: torch.Tensor, k_stride: int, cos: Any, sin: Any):
        self.calls.append(("rope", {"q": q, "k": k, "strides": (q_stride, k_stride)}))

        def launch() -> None:  # in place, half pairing, as Liger's kernel
            c, s = cos[None, :, None, :], sin[None, :, None, :]
            for x in (q, k):
                x1, x2 = x.chunk(2, dim=-1)
                x.copy_(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1))

        return launch

    def silu_mul(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor):
        self.calls.append(("swiglu", {"a": a, "out": out}))
        return lambda: out.copy_(F.silu(a) * b)


@needs_liger
def test_ligers_launches_are_patched_in_where_model_code_has_its_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    from backends.liger import decoder_layer

    fake = StandIns()
    monkeypatch.setattr(decoder_layer, "add_norm_launcher", fake.add_norm)
    monkeypatch.setattr(decoder_layer, "rotation", fake.rotation)
    monkeypatch.setattr(decoder_layer, "silu_mul_launcher", fake.silu_mul)
    monkeypatch.setattr(decoder_layer, "needs_gpu", lambda what: None)  # the interpreter's refusal: no kernel runs
    params = {**SMALL, "rope_pairing": "half"}
    target = targets.TARGETS[("torch", "cpu")]
    host = LAYER.make_inputs(params, "float32", np.random.default_rng(3))
    ref = LAYER.reference(host, params)
    out = target.empty(LAYER.output_shape(params), "float32")
    target.poison(out)
    inputs = {k: target.asarray(v) for k, v in host.items()}
    registry.REGISTRY.get(KEY)(inputs, out, params, {})()

    assert [name for name, _ in fake.calls] == ["add_rmsnorm", "rope", "add_rmsnorm", "swiglu"]
    (_, first), (_, rope), (_, second), (_, act) = fake.calls
    t, heads, kv, d = (params[k] for k in ("tokens", "heads", "kv_heads", "head_dim"))
    assert first["x"] is inputs["x"] and second["h"].data_ptr() == out[0].data_ptr()  # h2 straight into the output
    assert first["rstd"].dtype == torch.float32 and first["rstd"].shape == (t,)
    assert rope["q"].shape == (1, t, heads, d) and rope["k"].shape == (1, t, kv, d)
    assert rope["strides"] == (heads * d, kv * d) and rope["q"].is_contiguous()  # token-major, as the GEMMs wrote
    assert act["a"].shape == (t, params["intermediate"]) and act["out"].data_ptr() != out[1].data_ptr()
    tol = LAYER.tolerance(host, params, "float32", ref)
    _, problem = numerics.judge(target.to_host(out), ref, tol)
    assert problem == ""


@needs_triton
def test_an_interleaved_case_is_unsupported_naming_ligers_pairing() -> None:
    with pytest.raises(registry.Unsupported, match=r"\(half\) only, not interleaved"):
        registry.REGISTRY.get(KEY)({}, None, {**SMALL, "rope_pairing": "interleaved"}, {})


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LAYER.dtypes)
def test_on_a_gpu_ligers_layer_is_the_layer(dtype: str) -> None:
    """Liger's kernels for real, at the S preset in Llama's pairing, against the float64 chain, twice the same."""
    params = {**SMALL, "rope_pairing": "half"}
    target = targets.TARGETS[("liger", "cuda")]
    host = LAYER.make_inputs(params, dtype, np.random.default_rng(5))
    ref = LAYER.reference(host, params)
    out = target.empty(LAYER.output_shape(params), dtype)
    target.poison(out)
    launch = registry.REGISTRY.get(KEY)({k: target.asarray(v) for k, v in host.items()}, out, params, {"stream": None})
    launch()
    target.synchronize()
    first = np.asarray(target.to_host(out))
    _, problem = numerics.judge(first, ref, LAYER.tolerance(host, params, dtype, ref))
    assert problem == ""
    launch()
    target.synchronize()
    assert np.array_equal(np.asarray(target.to_host(out)), first)


SM90 = """
import inspect, json
import numpy as np, torch
from suite.core import registry, scenario as scenarios
from suite.core.registry import KernelKey
from backends.torch.bridge import to_torch
from tests.sm90 import compile_sm90

registry.discover()
scenarios.discover()
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
KERNELS = {("liger_kernel.ops.fused_add_rms_norm", "_fused_add_rms_norm_forward_kernel"): "add_rmsnorm",
           ("liger_kernel.ops.rope", "_triton_rope"): "rope", ("liger_kernel.ops.swiglu", "_swiglu_forward_kernel"): "swiglu"}
calls = []


def kind(value):
    if isinstance(value, torch.Tensor):
        return "*" + TYPES[value.dtype]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return "constexpr"
    return ("i32" if abs(value) < 2**31 else "i64") if isinstance(value, int) else "fp32"


class Recorder:
    def __init__(self, fn, label):
        self.fn, self.label = fn, label

    def __getitem__(self, grid):
        return lambda *args, **kwargs: calls.append((self.label, self.fn, grid, args, kwargs))


for (module, name), label in KERNELS.items():
    mod = __import__(module, fromlist=[name])
    setattr(mod, name, Recorder(getattr(mod, name), label))
layer = scenarios.SCENARIOS["decoder_layer"]
params = {"tokens": 3, "hidden": 576, "heads": 9, "kv_heads": 3, "head_dim": 64, "intermediate": 1536,
          "rope_pairing": "half"}
inputs = {k: to_torch(v) for k, v in layer.make_inputs(params, "float16", np.random.default_rng(7)).items()}
out = torch.empty(layer.output_shape(params), dtype=torch.float16)
registry.REGISTRY.get(KernelKey("decoder_layer", "liger", "library", "cuda"))(inputs, out, params, {"stream": None})()
for label, fn, grid, args, kwargs in calls:
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    bound = inspect.signature(fn.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    const = {p.name: bound.arguments[p.name] for p in fn.params
             if p.is_constexpr or kind(bound.arguments[p.name]) == "constexpr"}
    signature = {k: ("constexpr" if k in const else kind(v)) for k, v in bound.arguments.items()}
    k, log = compile_sm90(fn, signature, const, options)
    print(json.dumps({"kernel": label, "grid": list(grid), "ptx": k.asm["ptx"], "ptxas": log}))
"""


@pytest.mark.compile
@needs_liger
def test_the_layers_liger_launches_compile_for_sm90_as_launched() -> None:
    """The layer's four launches of Liger's kernels, recorded on the CPU at SmolLM2-135M's widths (nine query heads
    on three K/V heads) in float16 and compiled for sm_90 with the arguments the layer passed: what the GPU would
    run, in the layer's order."""
    from suite.gpu.ptxas import parse_ptxas

    proc = run_without_emulation(SM90)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert [r["kernel"] for r in rows] == ["add_rmsnorm", "rope", "add_rmsnorm", "swiglu"]
    assert all(r["grid"] == [3] for r in rows)  # one program per token (row) in each
    for row in rows:
        assert ".target sm_90" in row["ptx"]
        (resources,) = parse_ptxas(row["ptxas"]).values()
        assert resources.registers > 0 and resources.spill_bytes == 0, f"{row['kernel']}: {resources}"
