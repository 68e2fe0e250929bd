"""bfloat16 storage: NumPy knows the name once the suite is imported, arrays cross to torch bit for bit, Triton's
interpreter multiplies bfloat16 tiles as numbers, and a run gives Numba and CuPy `skipped` rows with the reason
while torch and Triton are judged against the float64 reference.

Every kernel's bfloat16 numerics on awkward shapes are in tests/test_kernels.py (parametrized by dtype)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from backends.torch.bridge import to_numpy, to_torch
from suite.core import dtypes, numerics, targets

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204


def test_name_known_and_rounding_is_bfloat16s():
    x = np.random.default_rng(SEED).uniform(-3, 3, 1000)
    rounded = x.astype("bfloat16").astype(np.float64)
    assert np.dtype("bfloat16").itemsize == 2 and dtypes.is_float("bfloat16")
    assert dtypes.eps("bfloat16") == 2.0**-7 and dtypes.eps("float16") == 2.0**-10
    assert 0 < np.max(np.abs(rounded - x) / np.abs(x)) <= 2.0**-8  # round to nearest: half an ulp, not float16's
    assert np.array_equal(rounded, torch.from_numpy(x).to(torch.bfloat16).double().numpy())  # same rounding as torch


def test_torch_bridge_is_bit_exact_both_ways():
    bits = np.random.default_rng(SEED).integers(0, 2**16, 4099, dtype=np.uint16)
    a = bits.view(np.dtype("bfloat16"))  # every pattern, NaNs and infinities included
    t = to_torch(a)
    assert t.dtype == torch.bfloat16 and t.shape == a.shape
    assert np.array_equal(t.view(torch.uint16).numpy(), bits)
    back = to_numpy(t)
    assert back.dtype == np.dtype("bfloat16") and np.array_equal(back.view(np.uint16), bits)
    f = np.arange(6, dtype=np.float32)
    assert to_numpy(to_torch(f)).dtype == np.float32  # other dtypes pass through unchanged


def test_judge_catches_a_poisoned_bfloat16_output():
    ref = np.random.default_rng(SEED).uniform(1, 2, 64)
    out = ref.astype("bfloat16")
    assert numerics.judge(out, ref, 2.0**-8)[1] == ""
    out[7] = np.nan
    assert "1 of 64 elements unwritten" in numerics.judge(out, ref, 2.0**-8)[1]


def test_numba_and_cupy_refuse_bfloat16_with_a_reason():
    from suite.core import registry

    registry.discover()
    for key in [("numba", "cpu"), ("numba", "cuda"), ("cupy", "cuda")]:
        target = targets.TARGETS[key]
        assert target.dtype_refusal("float16") == "" and target.dtype_refusal("float32") == ""
        assert target.dtype_refusal("bfloat16") != ""
    for key in [("torch", "cpu"), ("triton", "cuda")]:
        assert targets.TARGETS[key].dtype_refusal("bfloat16") == ""


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="checks Triton's interpreter")
def test_interpreted_dot_multiplies_bfloat16_values_not_bit_patterns():
    import triton
    import triton.language as tl

    import backends.triton  # noqa: F401  installs the widening

    @triton.jit
    def dot16(a_ptr, b_ptr, c_ptr):
        i = tl.arange(0, 16)
        a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
        b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
        tl.store(c_ptr + i[:, None] * 16 + i[None, :], tl.dot(a, b))

    rng = np.random.default_rng(SEED)
    a, b = (rng.uniform(-1, 1, (16, 16)).astype("bfloat16") for _ in range(2))
    c = torch.empty(16, 16, dtype=torch.float32)
    dot16[(1,)](to_torch(a), to_torch(b), c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.max(np.abs(c.numpy() - want)) < 1e-5  # float32 accumulation of exact bfloat16 products


def test_run_skips_numba_and_judges_torch_and_triton(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "suite", "scenario=rmsnorm", "preset=S", "dtype=bfloat16",
                             "backends=[numba,torch,triton]", "variants=[fused,unfused,eager]", "timing=quick",
                             "scenario.rows=[33]", "scenario.cols=[193]", f"hydra.run.dir={out}"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["dtype"]) == {"bfloat16"}
    numba = rows[(rows["backend"] == "numba") & rows["variant"].isin(["fused", "unfused"])]
    assert len(numba) and (numba["status"] == "skipped").all()
    assert numba["reason"].str.contains("no bfloat16 array type").all()
    judged = rows[rows["backend"].isin(["torch", "triton"]) & rows["mode"].isin(["native", "emulated"])]
    assert set(judged["backend"]) == {"torch", "triton"}
    assert (judged["status"] == "ok").all(), judged[["backend", "variant", "status", "reason"]]
    assert (judged["max_rel_err"] > 0).all() and (judged["max_rel_err"] <= judged["tolerance"]).all()
    assert (judged["tolerance"] >= 2e-3).all()  # bfloat16's, not float32's: the rounding is there to be seen
