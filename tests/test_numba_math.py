"""The vectorisable float32 tanh and sigmoid of the Numba CPU kernels (`backends.numba.fast_math`), and the
`backend_options.numba.math` switch between them and libm.

Errors are in ulp of the exact result (float64 libm), on a seeded sample of every kind of float32 (random bit
patterns, a dense grid where the functions bend, both sides of every threshold); the full 2³² sweep behind the
bounds in fast_math's docstring takes minutes and runs with FUSEBENCH_FULL_RANGE=1.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import njit, prange

from backends.numba.fast_math import EXP_NEG_LO, TANH_SMALL, gelu_fast, sigmoid_fast, silu_fast, tanh_fast
from backends.numba.on_cpu import elementwise_chain as _cpu  # noqa: F401 - importing registers the kernels
from backends.numba.op_tables import op_table
from backends.numba.ops import HARDWARE_HALF, _float_from_bits
from scenarios.elementwise_chain import ALL8, ElementwiseChain
from suite.cli import precheck
from suite.core.errors import ConfigError
from suite.core.numerics import judge
from suite.core.registry import REGISTRY, KernelKey, notes

TANH_ULP, SIGMOID_ULP = 1.5, 2.5
"""The bounds measured over all 2³² inputs (1.46 and 2.40 ulp); the sample must stay within them."""
SCENARIO = ElementwiseChain()


def _apply(f):  # type: ignore[no-untyped-def]
    @njit(parallel=True)
    def apply(x, y):  # type: ignore[no-untyped-def]
        for i in prange(x.size):
            y[i] = f(x[i])

    return apply


TANH, SIGMOID, SILU, GELU = (_apply(f) for f in (tanh_fast, sigmoid_fast, silu_fast, gelu_fast))


def _run(apply, x: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    y = np.full_like(x, np.nan)
    apply(x, y)
    return y


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    """1/(1 + e^−x) in float64 without overflow: e^x/(1 + e^x) on the left."""
    t = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, t) / (1.0 + t)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got − exact| in units of 2^(e−23) for exact in [2^e, 2^(e+1)), 2⁻¹⁴⁹ among the subnormals."""
    _, e = np.frexp(exact)
    ulp = np.ldexp(1.0, np.maximum(e - 24, -149))
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - exact) / ulp
    err[got.astype(np.float64) == exact] = 0.0  # infinities equal
    return err


def _sample() -> np.ndarray:
    rng = np.random.default_rng(20260714)
    bits = rng.integers(0, 2**32, 2**22, dtype=np.uint64).astype(np.uint32)
    dense = rng.uniform(-12.0, 12.0, 2**20)
    edges = np.array([TANH_SMALL, 9.0, 44.0, 52.0, 87.3, 88.4, 103.0, 104.0, 1e-38, 1e-45, 1.0])
    near = (edges.astype(np.float32).view(np.uint32)[:, None] + np.arange(-64, 65, dtype=np.int64)).ravel()
    x = np.concatenate([bits.view(np.float32), dense.astype(np.float32), near.astype(np.uint32).view(np.float32)])
    x = np.concatenate([x, -x])
    return x[~np.isnan(x)]


SAMPLE = _sample()


@pytest.mark.parametrize(
    ("apply", "exact", "bound"),
    [pytest.param(TANH, np.tanh, TANH_ULP, id="tanh"), pytest.param(SIGMOID, _sigmoid64, SIGMOID_ULP, id="sigmoid")],
)
def test_error_within_bound_on_a_sample(apply, exact, bound) -> None:  # type: ignore[no-untyped-def]
    ulps = _ulps(_run(apply, SAMPLE), exact(SAMPLE.astype(np.float64)))
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= bound, f"{ulps[worst]:.3f} ulp at x = {SAMPLE[worst]!r}"


def _full_range_scan(f32, f64):  # type: ignore[no-untyped-def]
    @njit(parallel=True)
    def scan(chunks, chunk):  # type: ignore[no-untyped-def]
        worst = np.zeros(chunks)
        for c in prange(chunks):
            for k in range(chunk):
                x = _float_from_bits(np.uint32(c * chunk + k))
                got, want = np.float64(f32(x)), f64(np.float64(x))
                if math.isnan(want) or got == want:
                    err = 0.0 if math.isnan(got) == math.isnan(want) else math.inf
                else:
                    err = abs(got - want) / math.ldexp(1.0, max(math.frexp(want)[1] - 24, -149))
                worst[c] = max(worst[c], err)
        return worst

    return scan


@njit
def _tanh64(x: float) -> float:
    return math.tanh(x)


@njit
def _sigmoid64_scalar(x: float) -> float:
    t = math.exp(-abs(x))
    return (1.0 if x >= 0 else t) / (1.0 + t)


@pytest.mark.skipif(os.environ.get("FUSEBENCH_FULL_RANGE") != "1", reason="minutes; FUSEBENCH_FULL_RANGE=1 runs it")
@pytest.mark.parametrize(
    ("f32", "f64", "bound"),
    [(tanh_fast, _tanh64, TANH_ULP), (sigmoid_fast, _sigmoid64_scalar, SIGMOID_ULP)],
    ids=["tanh", "sigmoid"],
)
def test_error_within_bound_on_every_float32(f32, f64, bound) -> None:  # type: ignore[no-untyped-def]
    assert _full_range_scan(f32, f64)(2**12, 2**20).max() <= bound


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


SUBNORMALS = np.array([1e-45, -1e-45, 1e-40, -3e-39, 1.1e-38], np.float32)


def test_tanh_edges() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 9.02, -9.02, 50.0, -1e30, 3.4e38], np.float32)
    y = _run(TANH, x)
    np.testing.assert_array_equal(_bits(y[:2]), _bits([0.0, -0.0]))  # the sign of zero kept
    np.testing.assert_array_equal(y[[2, 3, 5, 6, 7, 8, 9]], [1, -1, 1, -1, 1, -1, 1])  # saturated exactly
    assert np.isnan(y[4])
    np.testing.assert_array_equal(_bits(_run(TANH, SUBNORMALS)), _bits(SUBNORMALS))  # tanh(x) = x there
    below, above = np.nextafter(TANH_SMALL, np.float32(0)), TANH_SMALL
    both = np.array([below, above, -below, -above], np.float32)
    assert _ulps(_run(TANH, both), np.tanh(both.astype(np.float64))).max() <= TANH_ULP


def test_sigmoid_edges() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 17.0, 1e30, -110.0, -1e30], np.float32)
    y = _run(SIGMOID, x)
    np.testing.assert_array_equal(y[[0, 1, 2, 3, 5, 6, 7, 8]], [0.5, 0.5, 1, 0, 1, 1, 0, 0])
    assert np.isnan(y[4])
    np.testing.assert_array_equal(_run(SIGMOID, SUBNORMALS), 0.5)
    tail = np.array([-87.0, -88.5, -95.0, -103.0, EXP_NEG_LO + 0.5], np.float32)  # results down in the subnormals
    got = _run(SIGMOID, tail)
    assert (got > 0).all() and _ulps(got, _sigmoid64(tail.astype(np.float64))).max() <= SIGMOID_ULP


def test_silu_and_gelu_relative_error() -> None:
    """silu within 4 ulp of relative error; gelu = v·sigmoid(2u) within 4 ulp plus 4 ulp per unit of |2u|: for
    v < 0 the rounding of u in float32 is amplified by exp's conditioning (2u·δ), whatever evaluates it."""
    x = np.random.default_rng(5).uniform(-10, 10, 2**20).astype(np.float32)
    v = x.astype(np.float64)
    u = 0.7978845608 * (v + 0.044715 * v**3)
    silu, gelu = v * _sigmoid64(v), v * _sigmoid64(2 * u)
    assert (np.abs(_run(SILU, x) - silu) / np.abs(silu)).max() <= 4 * 2.0**-24
    normal = np.abs(gelu) > 1e-30  # gelu(v < −9.3) ends in the subnormals, with their absolute rounding
    rel = np.abs(_run(GELU, x) - gelu)[normal] / np.abs(gelu[normal])
    assert (rel <= (4 + 4 * np.abs(2 * u[normal])) * 2.0**-24).all()


# The math switch ---------------------------------------------------------------------------------------------


def _chain(variant: str, params: dict, dtype: str, opts: dict, x=None) -> tuple[np.ndarray, dict, dict]:  # type: ignore[no-untyped-def]
    inputs = SCENARIO.make_inputs(params, dtype, np.random.default_rng(params["n"])) if x is None else {"x": x}
    out = np.full(SCENARIO.output_shape(params), np.nan, dtype)
    launch = REGISTRY.get(KernelKey("elementwise_chain", "numba", variant, "cpu"))(inputs, out, params, opts)
    launch()
    return out, inputs, notes(launch)


@pytest.mark.parametrize("math_mode", ["fast", "libm"])
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("ops", [ALL8, ["gelu", "tanh"], ["sigmoid", "silu"]], ids=["all8", "gelu-tanh", "sig-silu"])
def test_chain_kernel_matches_reference(math_mode: str, variant: str, dtype: str, ops: list[str]) -> None:
    params = {"n": 100_003, "ops": ops}
    out, inputs, said = _chain(variant, params, dtype, {"math": math_mode})
    ref = SCENARIO.reference(inputs, params)
    _, reason = judge(out, ref, SCENARIO.tolerance(inputs, params, dtype, ref))
    assert not reason, reason
    assert said["math"] == math_mode


@pytest.mark.parametrize("op", ["tanh", "sigmoid", "silu", "gelu"])
def test_libm_mode_is_the_libm_ops_bit_for_bit(op: str) -> None:
    """math=libm runs exactly the scalar libm functions the CUDA target runs too."""
    x = np.random.default_rng(9).uniform(-20, 20, 4099).astype(np.float32)
    out, _, _ = _chain("fused", {"n": x.size, "ops": [op]}, "float32", {"math": "libm"}, x)
    want = _run(_apply(op_table("libm")[op]), x)
    np.testing.assert_array_equal(_bits(out), _bits(want))
    if op == "tanh":
        np.testing.assert_array_equal(_bits(out), _bits(_run(_apply(_libm_tanh), x)))


@njit
def _libm_tanh(v: np.float32) -> np.float32:
    return math.tanh(v)


def test_default_is_fast_and_fused_equals_unfused() -> None:
    """Explicit FMA, no fast-math flags: storing a float32 intermediate changes nothing."""
    params = {"n": 4099, "ops": ALL8 + ALL8}
    fused, _, said = _chain("fused", params, "float32", {})
    unfused, _, _ = _chain("unfused", params, "float32", {})
    assert said == {"math": "fast", "stages": 8}
    np.testing.assert_array_equal(_bits(fused), _bits(unfused))


def test_bad_math_option_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"backend_options\.numba\.math=foo must be one of fast, libm"):
        precheck(["backend_options.numba.math=foo"])
    proc = subprocess.run([sys.executable, "-m", "suite", "backend_options.numba.math=foo"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fast, libm" in lines[0] and "Traceback" not in proc.stdout


# Vectorisation -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_fast_chain_kernel_vectorises_without_libm(dtype: str) -> None:
    """The point of math=fast: no tanhf or expf call in the loop, 8- or 16-wide FMAs instead (and F16C conversions)."""
    from backends.numba.on_cpu.elementwise_chain import chain_kernel

    _chain("fused", {"n": 64, "ops": ALL8}, dtype, {})
    _chain("fused", {"n": 64, "ops": ALL8}, dtype, {"math": "libm"})
    fast, libm = chain_kernel(tuple(ALL8), dtype, "fast"), chain_kernel(tuple(ALL8), dtype, "libm")
    (sig,) = fast.signatures
    llvm, asm = fast.inspect_llvm(sig), fast.inspect_asm(sig)
    assert "@tanhf" not in llvm and "@expf" not in llvm and "tanhf" not in asm and "expf" not in asm
    # 8 lanes on AVX2, 16 on AVX-512: Numba compiles for the host CPU's widest vectors
    assert re.search(r"@llvm\.fma\.v(8|16)f32", llvm) and re.search(r"\b[yz]mm\d", asm)
    assert "tanhf" in libm.inspect_llvm(libm.signatures[0])  # the check can see a libm call where there is one
    if dtype == "float16" and HARDWARE_HALF:
        assert "vcvtph2ps" in asm and "vcvtps2ph" in asm
