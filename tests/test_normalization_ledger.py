"""The normalization ledger against hand counts, and the scenario's checks, presets and emulation slices."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.normalization import DECOMPOSITIONS, ROW_STATS, LayerNorm, RMSNorm, Softmax, reread_bytes
from suite.core.errors import ConfigError
from suite.core.ledger import WRITE_ALLOCATE, WRITE_ONCE

R, C = 3, 5
N = R * C
SCENARIOS = {"layernorm": LayerNorm(), "rmsnorm": RMSNorm(), "softmax": Softmax()}

# (name, bytes read, bytes written, flops) per unfused kernel, written out by hand; s = itemsize, stats float32.
HAND = {
    "layernorm": lambda s: [
        ("row mean", N * s, 4 * R, N),
        ("centre", N * s + 4 * R, N * s, N),
        ("row variance", N * s, 4 * R, 2 * N),
        ("normalise", N * s + 4 * R, N * s, N + 3 * R),
        ("scale and shift", N * s + 2 * C * s, N * s, 2 * N),
    ],
    "rmsnorm": lambda s: [
        ("row mean square", N * s, 4 * R, 2 * N),
        ("normalise", N * s + 4 * R, N * s, N + 3 * R),
        ("scale", N * s + C * s, N * s, N),
    ],
    "softmax": lambda s: [
        ("row max", N * s, 4 * R, N),
        ("shift", N * s + 4 * R, N * s, N),
        ("exp", N * s, N * s, N),
        ("row sum", N * s, 4 * R, N),
        ("divide", N * s + 4 * R, N * s, N),
    ],
}
VECTORS = {"layernorm": 2, "rmsnorm": 1, "softmax": 0}
"""weight and bias vectors (cols·s bytes each) every variant reads once."""


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("op", list(SCENARIOS))
def test_unfused_kernels_match_hand_counts(op: str, dtype: str, s: int) -> None:
    lg = SCENARIOS[op].ledger({"rows": R, "cols": C, "tile": 64}, dtype)["unfused"]
    got = [(k.name, k.bytes_read, k.bytes_written, k.flops) for k in lg.kernels]
    assert got == HAND[op](s)
    assert lg.launches == len(DECOMPOSITIONS[op])


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("op", list(SCENARIOS))
def test_fused_reads_x_once_within_the_tile_and_twice_beyond(op: str, dtype: str, s: int) -> None:
    vectors = VECTORS[op] * C * s
    fits = SCENARIOS[op].ledger({"rows": R, "cols": C, "tile": 64}, dtype)
    wide = SCENARIOS[op].ledger({"rows": R, "cols": C, "tile": 4}, dtype)
    assert (fits["fused"].bytes_read, fits["fused"].bytes_written, reread_bytes(fits["fused"])) == (
        N * s + vectors,
        N * s,
        0,
    )
    assert (wide["fused"].bytes_read, reread_bytes(wide["fused"])) == (2 * N * s + vectors, N * s)
    assert fits["fused"].launches == wide["fused"].launches == 1
    # the library gets the minimal ledger, whatever the tile
    assert wide["library"].bytes_read == fits["library"].bytes_read == N * s + vectors
    assert fits["fused"].flops == fits["unfused"].flops == wide["library"].flops


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("op", list(SCENARIOS))
def test_removed_intermediates_and_what_fusion_saves(op: str, dtype: str, s: int) -> None:
    """Each removed matrix saves 2·N·s and each statistic 2·R·4; the unfused variant also reads x and
    intermediates more than once, which fusion removes too — the saving is a lower bound of the difference."""
    lg = SCENARIOS[op].ledger({"rows": R, "cols": C, "tile": 64}, dtype)
    removed = {i.name: (i.elements, i.itemsize) for i in lg["fused"].removed}
    expected = {st.writes: (R, 4) if st.writes in ROW_STATS else (N, s) for st in DECOMPOSITIONS[op][:-1]}
    assert removed == expected
    matrices = sum(1 for st in DECOMPOSITIONS[op][:-1] if st.writes not in ROW_STATS)
    stats = len(DECOMPOSITIONS[op]) - 1 - matrices
    assert lg["fused"].saved_bytes == matrices * 2 * N * s + stats * 2 * R * 4
    diff = lg["unfused"].bytes_moved(WRITE_ONCE) - lg["fused"].bytes_moved(WRITE_ONCE)
    assert diff >= lg["fused"].saved_bytes


def test_softmax_is_the_tutorials_count_five_mn_plus_two_m() -> None:
    """The Triton tutorial's naive softmax, in float32 elements: read 5·M·N + 2·M, write 3·M·N + 2·M."""
    m, n = 1823, 781
    lg = SCENARIOS["softmax"].ledger({"rows": m, "cols": n, "tile": 1024}, "float32")["unfused"]
    assert (lg.bytes_read // 4, lg.bytes_written // 4) == (5 * m * n + 2 * m, 3 * m * n + 2 * m)


def test_perf_shape_minimal_traffic_and_cpu_store_model() -> None:
    """65,536 × 1,024 float32: x read once and y written once (512 MiB) plus the vectors; write-allocate on
    the CPU counts y's bytes twice."""
    lg = SCENARIOS["layernorm"].ledger({"rows": 65536, "cols": 1024, "tile": 4096}, "float32")
    fused, unfused = lg["fused"], lg["unfused"]
    assert fused.bytes_read + fused.bytes_written == 2**29 + 2 * 1024 * 4
    assert fused.bytes_moved(WRITE_ALLOCATE) == fused.bytes_read + 2 * fused.bytes_written
    predicted = unfused.bytes_moved(WRITE_ALLOCATE) / fused.bytes_moved(WRITE_ALLOCATE)
    assert predicted == pytest.approx(11 / 3, rel=1e-3)  # 5 reads + 3 writes · 2 against 1 read + 1 write · 2


@pytest.mark.parametrize("cols", [4096, 4097])
def test_reread_starts_one_column_past_the_tile(cols: int) -> None:
    lg = SCENARIOS["rmsnorm"].ledger({"rows": 2, "cols": cols, "tile": 4096}, "float16")
    assert reread_bytes(lg["fused"]) == (0 if cols == 4096 else 2 * cols * 2)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"rows": 0, "cols": 8, "tile": 64}, "rows=0"),
        ({"rows": 2, "cols": 8.5, "tile": 64}, "cols=8.5"),
        ({"rows": 2, "cols": 8, "tile": 100}, "power of two"),
        ({"rows": 2, "cols": 8, "tile": 16}, "power of two"),
        ({"rows": 2**20, "cols": 2**12, "tile": 64}, "exceeds"),
    ],
)
def test_impossible_cases_are_refused(params: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SCENARIOS["layernorm"].check(params)


def test_presets_cross_the_tile_and_include_the_awkward_and_the_perf_shapes() -> None:
    scn = SCENARIOS["softmax"]
    for preset, axes in scn.presets.items():
        cases = scn.cases(axes)
        assert any(c["cols"] <= c["tile"] for c in cases), preset
        assert any(c["cols"] > c["tile"] for c in cases), preset
    assert any(c["rows"] == 1823 and c["cols"] == 781 for c in scn.cases(scn.presets["M"]))
    assert any(c["rows"] == 65536 and c["cols"] == 1024 for c in scn.cases(scn.presets["L"]))
    assert any(c["cols"] > c["tile"] for c in scn.checks) and any(c["cols"] == 1 for c in scn.checks)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"rows": 1823, "cols": 781, "tile": 4096}, {"rows": 5, "cols": 781, "tile": 4096}),
        ({"rows": 1823, "cols": 32768, "tile": 4096}, {"rows": 1, "cols": 4095, "tile": 2048}),
        ({"rows": 9, "cols": 8192, "tile": 16384}, {"rows": 1, "cols": 4096, "tile": 16384}),
        ({"rows": 3, "cols": 65536, "tile": 64}, {"rows": 1, "cols": 4095, "tile": 64}),
    ],
)
def test_emulation_slices_keep_the_path(params: dict, expected: dict) -> None:
    """Fewer rows; a row too wide for the budget shrinks but stays wider than its tile if it was."""
    small = SCENARIOS["layernorm"].emulation_params(params, 4096)
    assert small == expected
    assert (small["cols"] > small["tile"]) == (params["cols"] > params["tile"])
    SCENARIOS["layernorm"].check(small)


def test_inputs_have_named_vectors_and_shifted_odd_rows() -> None:
    params = {"rows": 4, "cols": 50, "tile": 64}
    rng = np.random.default_rng(0)
    ln = SCENARIOS["layernorm"].make_inputs(params, "float16", rng)
    assert set(ln) == {"x", "weight", "bias"} and ln["x"].dtype == np.float16 and ln["weight"].shape == (50,)
    assert set(SCENARIOS["rmsnorm"].make_inputs(params, "float32", rng)) == {"x", "weight"}
    x = SCENARIOS["softmax"].make_inputs(params, "float32", rng)["x"]
    assert np.all(x[1::2] > 76) and np.all(np.abs(x[::2]) <= 3)
