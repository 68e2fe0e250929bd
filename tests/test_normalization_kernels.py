"""Normalization kernels on the shapes test_kernels does not reach: rows wider than the tile (up to 65,536
columns), a row exactly one tile wide and one column more, rows far from zero, every backend that runs here
(Numba CPU for real, Triton in its interpreter, Numba CUDA in the simulator on small shapes, torch's
library kernels), and the vectorisable exp the CPU softmax kernels are built on.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import numerics, registry, targets
from suite.core.registry import KernelKey
from suite.core.scenario import get

registry.discover()
OPS = ("layernorm", "rmsnorm", "softmax")


def run(op: str, backend: str, device: str, variant: str, params: dict, dtype: str, inputs=None, opts=None):
    """(output, reference, tolerance) of one registered kernel on one case, into a NaN-poisoned buffer."""
    scn, target = get(op), targets.TARGETS[(backend, device)]
    inputs = inputs if inputs is not None else scn.make_inputs(params, dtype, np.random.default_rng(7))
    ref = scn.reference(inputs, params)
    out = target.empty(scn.output_shape(params), dtype)
    target.poison(out)
    entry = registry.REGISTRY.get(KernelKey(op, backend, variant, device))
    launch = entry({k: target.asarray(v) for k, v in inputs.items()}, out, params, {"stream": None, **(opts or {})})
    launch()
    target.synchronize()
    return np.asarray(target.to_host(out)), ref, scn.tolerance(inputs, params, dtype, ref)


def check(out: np.ndarray, ref: np.ndarray, tol: float, what: str) -> None:
    _, problem = numerics.judge(out, ref, tol)
    assert not problem, f"{what}: {problem}"


def _runs(backend: str, device: str) -> object:
    target = targets.TARGETS.get((backend, device))
    avail = target.probe() if target else targets.Availability(targets.UNAVAILABLE, "no target")
    return pytest.mark.skipif(not avail.runs, reason=f"{backend}/{device}: {avail.reason}")


# Numba CPU: every path at full width -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "params",
    [
        {"rows": 3, "cols": 65536, "tile": 4096},  # 16 chunks, a re-read
        {"rows": 2, "cols": 4096, "tile": 4096},  # exactly one tile
        {"rows": 2, "cols": 4097, "tile": 4096},  # one column more: a last chunk of one
    ],
    ids=["65536-tile4096", "4096-tile4096", "4097-tile4096"],
)
def test_numba_cpu_wide_rows(op: str, dtype: str, variant: str, params: dict) -> None:
    out, ref, tol = run(op, "numba", "cpu", variant, params, dtype)
    check(out, ref, tol, f"{op} {variant} {dtype} {params}")


@pytest.mark.parametrize("op", OPS)
def test_cpu_fused_and_unfused_agree_closely_in_float32(op: str) -> None:
    """Same scalar code, only fusion differs: in float32 the variants differ by summation order alone."""
    params = {"rows": 5, "cols": 1000, "tile": 256}
    fused, _, tol = run(op, "numba", "cpu", "fused", params, "float32")
    unfused, _, _ = run(op, "numba", "cpu", "unfused", params, "float32")
    assert numerics.rel_err(fused, unfused) <= tol


@pytest.mark.parametrize("op", OPS)
def test_rows_far_from_zero(op: str) -> None:
    """Every row around 80: exp(x) overflows float32 summed over a row, so only the max subtraction keeps
    softmax finite; layernorm's variance must not cancel."""
    params = {"rows": 4, "cols": 4096, "tile": 1024}
    rng = np.random.default_rng(3)
    x = (80.0 + rng.uniform(0.0, 3.0, (4, 4096))).astype(np.float32)
    inputs = {"x": x, "weight": rng.uniform(0.5, 1.5, 4096).astype(np.float32)}
    inputs = {k: v for k, v in inputs.items() if k in get(op).inputs} | (
        {"bias": rng.uniform(-0.1, 0.1, 4096).astype(np.float32)} if op == "layernorm" else {}
    )
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(x).sum(axis=-1, dtype=np.float32)).all()  # the naive softmax overflows
    for variant in ("fused", "unfused"):
        out, ref, tol = run(op, "numba", "cpu", variant, params, "float32", inputs=inputs)
        check(out, ref, tol, f"{op} {variant}")


def test_tolerance_grows_with_row_length() -> None:
    """A sum of 65,536 values is not exact: the emulated error of the same data grows with cols, and so does
    the tolerance built on it."""
    from scenarios.normalization import emulate

    scn = get("layernorm")
    own, tols = [], []
    for cols in (256, 65536):
        params = {"rows": 4, "cols": cols, "tile": 4096}
        inputs = scn.make_inputs(params, "float32", np.random.default_rng(0))
        ref = scn.reference(inputs, params)
        own.append(numerics.rel_err(emulate("layernorm", inputs, "float32"), ref))
        tols.append(scn.tolerance(inputs, params, "float32", ref))
    assert own[1] > 4 * own[0]
    assert tols[1] > tols[0] and tols[1] >= 4 * own[1]


# The vectorisable exp ------------------------------------------------------------------------------------------


def _exp_kernel():  # type: ignore[no-untyped-def]
    from numba import njit

    from backends.numba.on_cpu.normalization_kernels import FASTMATH
    from backends.numba.ops import exp_float32

    @njit(fastmath=FASTMATH)  # the flags the kernels compile with: reassociation must not break the reduction
    def apply(x, y):  # type: ignore[no-untyped-def]
        for i in range(x.size):
            y[i] = exp_float32(x[i])

    return apply


def test_exp_float32_within_two_ulp() -> None:
    apply = _exp_kernel()
    x = np.concatenate([np.linspace(-87.33, 0.0, 400_001), np.linspace(0.0, 88.37, 100_001)]).astype(np.float32)
    x = np.concatenate([x, -np.geomspace(1e-30, 1, 1001, dtype=np.float32)])
    y = np.empty_like(x)
    apply(x, y)
    exact = np.exp(x.astype(np.float64))
    ulps = np.abs(y.astype(np.float64) - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 2.0, f"{ulps.max():.2f} ulp at x = {x[np.argmax(ulps)]}"


def test_exp_float32_edges() -> None:
    apply = _exp_kernel()
    x = np.array([0.0, -0.0, -np.inf, -100.0, -87.34, 89.0, np.inf, np.nan], dtype=np.float32)
    y = np.empty_like(x)
    apply(x, y)
    assert y[0] == 1.0 and y[1] == 1.0
    assert y[2] == 0.0 and y[3] == 0.0 and 0.0 <= y[4] < 1.2e-38
    assert y[5] == np.inf and y[6] == np.inf and np.isnan(y[7])


def test_softmax_kernels_do_not_call_libm_exp() -> None:
    """The point of exp_float32: no call to expf in the loops, so LLVM can vectorise them."""
    from backends.numba.on_cpu.normalization_kernels import fused_kernel, step_kernel

    run("softmax", "numba", "cpu", "fused", {"rows": 2, "cols": 300, "tile": 128}, "float32")
    run("softmax", "numba", "cpu", "unfused", {"rows": 2, "cols": 300, "tile": 128}, "float32")
    for dispatcher in (fused_kernel("softmax", "float32"), step_kernel("map", "float32")):
        for sig in dispatcher.signatures:
            assert "@expf" not in dispatcher.inspect_llvm(sig)


@pytest.mark.parametrize("op", OPS)
def test_cpu_output_loops_multiply_by_the_reciprocal(op: str) -> None:
    """No vector division in the kernels: each row's 1/s is computed once and multiplied by, not sunk into
    the loop by fast-math reassociation as v/s (a vdivps per 8 values)."""
    import re

    from backends.numba.on_cpu.normalization_kernels import fused_kernel, step_kernel

    for variant in ("fused", "unfused"):
        run(op, "numba", "cpu", variant, {"rows": 2, "cols": 300, "tile": 128}, "float32")
    for dispatcher in (fused_kernel(op, "float32"), step_kernel("rowwise", "float32")):
        for sig in dispatcher.signatures:
            assert not re.search(r"fdiv[^\n]*<\d+ x float>", dispatcher.inspect_llvm(sig))


def test_vector_codecs_agree_with_numpy_on_every_half() -> None:
    """The float16 conversions the CPU kernels use (F16C where present) round exactly as NumPy does."""
    from numba import njit

    from backends.numba.ops import VECTOR_CODECS

    load, store = VECTOR_CODECS["float16"]

    @njit
    def widen_and_round(bits, wide, back):  # type: ignore[no-untyped-def]
        for i in range(bits.size):
            wide[i] = load(bits[i])
            back[i] = store(wide[i] * np.float32(1.5))

    bits = np.arange(2**16, dtype=np.uint16)
    wide, back = np.empty(bits.size, np.float32), np.empty_like(bits)
    widen_and_round(bits, wide, back)
    halves = bits.view(np.float16)
    finite = ~np.isnan(halves)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (halves.astype(np.float32) * np.float32(1.5)).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(wide[finite], halves[finite].astype(np.float32))
    np.testing.assert_array_equal(back[finite], expected[finite])
    assert np.isnan(wide[~finite]).all() and np.isnan(back[~finite].view(np.float16)).all()


def test_fmax32_is_maxnum() -> None:
    from numba import njit

    from backends.numba.ops import fmax32

    f = njit(lambda a, b: fmax32(a, b))
    one, nan = np.float32(1), np.float32(np.nan)
    assert f(one, np.float32(2)) == 2 and f(nan, one) == 1 and f(one, nan) == 1
    assert f(np.float32(-np.inf), one) == 1


# Triton interpreter and Numba CUDA simulator: the chunked path on small shapes -----------------------------------


@_runs("triton", "cuda")
@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    ("params", "dtype"),
    [({"rows": 2, "cols": 300, "tile": 32}, "float16"), ({"rows": 1, "cols": 65536, "tile": 4096}, "float32")],
    ids=["300-tile32", "65536-tile4096"],
)
def test_triton_chunked_in_interpreter(op: str, variant: str, params: dict, dtype: str) -> None:
    out, ref, tol = run(op, "triton", "cuda", variant, params, dtype)
    check(out, ref, tol, f"triton {op} {variant} {params}")


@_runs("numba", "cuda")
@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    ("params", "dtype"),
    [({"rows": 2, "cols": 100, "tile": 32}, "float32"), ({"rows": 1, "cols": 64, "tile": 64}, "float16")],
    ids=["100-tile32", "64-tile64"],
)
def test_numba_cuda_chunked_in_simulator(op: str, variant: str, params: dict, dtype: str) -> None:
    out, ref, tol = run(op, "numba", "cuda", variant, params, dtype, opts={"block": 32})
    check(out, ref, tol, f"numba/cuda {op} {variant} {params}")


# torch, the library rival ----------------------------------------------------------------------------------------


@_runs("torch", "cpu")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", OPS)
def test_torch_library_on_awkward_rows(op: str, dtype: str) -> None:
    out, ref, tol = run(op, "torch", "cpu", "library", {"rows": 9, "cols": 1023, "tile": 256}, dtype)
    check(out, ref, tol, f"torch {op} {dtype}")


# Numba CPU: pipelined blocks of rows --------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("rows", [1, 2, 3, 17, 100])
@pytest.mark.parametrize("op", OPS)
def test_numba_cpu_blocks_of_every_length(op: str, rows: int, dtype: str) -> None:
    """Blocks of one row, of two (no middle), and many, with a block's last row shorter: every row written once,
    each with its own statistics (rows shifted and scaled apart, so a statistic taken from a neighbour shows)."""
    scn = get(op)
    params = {"rows": rows, "cols": 781, "tile": 1024}
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(rows))
    order = np.arange(rows, dtype=np.float64)[:, None]
    inputs["x"] = (inputs["x"].astype(np.float64) * (1 + order % 5) + (order % 7 - 3) * 9).astype(dtype)
    out, ref, tol = run(op, "numba", "cpu", "fused", params, dtype, inputs=inputs)
    check(out, ref, tol, f"{op} {rows}×781 {dtype}")


def test_numba_cpu_softmax_block_rows_with_nan_and_inf() -> None:
    """A NaN in a row makes that row NaN and no other; +inf gives NaN (inf − inf) as the reference does; a row
    whose max is the block's first row's or its next row's is unaffected by the other."""
    params = {"rows": 6, "cols": 33, "tile": 64}
    x = np.random.default_rng(3).standard_normal((6, 33)).astype(np.float32)
    x[1, 5], x[3, 0], x[4] = np.nan, np.inf, x[4] + 80
    out, _, _ = run("softmax", "numba", "cpu", "fused", params, "float32", inputs={"x": x})
    assert np.isnan(out[1]).all() and np.isnan(out[3]).all()
    for r in (0, 2, 4, 5):
        e = np.exp(x[r].astype(np.float64) - x[r].max())
        np.testing.assert_allclose(out[r], e / e.sum(), rtol=2e-6, atol=1e-12)


def test_max_from_keys_is_the_max_of_the_floats() -> None:
    """The max and min of the floats' bits as int32 give the floats' max: rows of one sign, of both, with
    ±0, ±inf, subnormals and the extremes; a NaN with its sign bit clear is the max."""
    from numba import njit

    from backends.numba.on_cpu.normalization_blocks import KEY_MAX, KEY_MIN, key, max_from_keys

    @njit
    def row_max(row):  # type: ignore[no-untyped-def]
        hi, lo = KEY_MIN, KEY_MAX
        for j in range(row.size):
            k = key(row[j])
            hi, lo = max(hi, k), min(lo, k)
        return max_from_keys(hi, lo)

    rng = np.random.default_rng(20261203)
    specials = np.array([-np.inf, -3.4e38, -1.0, -1e-45, -0.0, 0.0, 1e-45, 1.0, 3.4e38, np.inf], np.float32)
    rows = [specials, -specials[specials > 0], specials[specials < 0], np.array([-0.0], np.float32)]
    rows += [rng.choice(specials, size=int(rng.integers(1, 12))) for _ in range(200)]
    rows += [(rng.standard_normal(50) * 10.0 ** rng.integers(-30, 30)).astype(np.float32) - s for s in (0, 1e3)]
    for row in rows:
        want = max(row, key=lambda v: (v, not np.signbit(v)))  # +0 above −0, as the keys order them
        got = row_max(row)
        assert got == want and np.signbit(got) == np.signbit(want), (row, got)
    assert np.isnan(row_max(np.array([1.0, np.nan, -2.0], np.float32)))


def test_numba_cpu_softmax_pipeline_vectorises() -> None:
    """The pipelined loop (exponentials, the next row's max, the previous row's output) is vector code: the
    max over integer keys lets LLVM vectorise it beside the sum, where a maxnum reduction would not."""
    from backends.numba.on_cpu.normalization_kernels import fused_kernel

    run("softmax", "numba", "cpu", "fused", {"rows": 9, "cols": 300, "tile": 512}, "float32")
    llvm = "".join(
        fused_kernel("softmax", "float32").inspect_llvm(s) for s in fused_kernel("softmax", "float32").signatures
    )
    import re

    assert re.search(r"icmp sgt <(8|16) x i32>|llvm\.smax\.v(8|16)i32", llvm), "the integer-key max is not vectorised"


@pytest.mark.parametrize("cols", [4000, 16000])
def test_numba_cpu_layernorm_blocks_sum_again_where_the_shift_would_cancel(cols: int) -> None:
    """The pipelined layernorm takes its moments shifted by each row's first value. Rows far from zero (3000)
    lose nothing to the offset; rows whose first value sits 60 spreads from the rest would lose about 11 bits of
    the variance to the shift, and are summed again about the mean. The error is held far below the tolerance
    (1e-5 of the largest output): without the second pass it is 7e-5 at 4,000 columns, 2e-4 at 16,000."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, cols))
    x[:, 0] = 60.0
    x[1:3, 0] = -60.0
    inputs = {"x": (x + 3000.0).astype(np.float32), "weight": rng.uniform(0.5, 1.5, cols).astype(np.float32),
              "bias": np.full(cols, 0.5, np.float32)}  # fmt: skip
    params = {"rows": 4, "cols": cols, "tile": 16384}
    out, ref, tol = run("layernorm", "numba", "cpu", "fused", params, "float32", inputs=inputs)
    check(out, ref, tol, f"layernorm {cols} with a far first value")
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-5
