"""The matmul scenario: ledger against hand counts, config checks, tolerance, and every kernel on awkward shapes.

tests/test_kernels.py already runs every registered kernel on the scenario's small `checks`; here the CPU
kernels and the Triton interpreter also run the issue's awkward 129×77×200 (no dimension a multiple of any
tile), with and without the epilogue, and the simulator a case whose threads hold 2×2 register tiles.
"""

from __future__ import annotations

import numpy as np
import pytest

from backends.numba.on_cpu.vector_width import WIDTHS
from scenarios.matmul import EPILOGUE_FLOPS, VARIANTS_BY_EPILOGUE, Matmul, gelu, tiled_reads
from suite.core import numerics, registry, targets
from suite.core.errors import ConfigError
from suite.core.ledger import WRITE_ALLOCATE, WRITE_ONCE
from suite.core.registry import KernelKey

MM = Matmul()
AWKWARD = {"m": 129, "n": 77, "k": 200}
SEED = 20261130


def _params(epilogue: str = "none", tile: list[int] | None = None, **shape: int) -> dict:
    return {**AWKWARD, **shape, "epilogue": epilogue, "tile": tile or [32, 32, 32]}


# Ledger ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
@pytest.mark.parametrize("tile", [[16, 16, 16], [32, 32, 32], [64, 64, 32], [128, 64, 16], [128, 128, 64]])
def test_tiled_traffic_is_mnk_over_tile_when_the_tile_divides(dtype: str, s: int, tile: list[int]) -> None:
    m = n = k = 256
    bm, bn, _ = tile
    lg = MM.ledger(_params(tile=tile, m=m, n=n, k=k), dtype)
    assert lg["tiled"].bytes_read == m * n * k * (bm + bn) // (bm * bn) * s  # M·N·K·(1/BN + 1/BM)
    assert lg["unblocked"].bytes_read == 2 * m * n * k * s
    assert lg["library"].bytes_read == (m * k + k * n) * s
    for v in ("unblocked", "tiled", "library"):
        assert lg[v].bytes_written == m * n * s and lg[v].flops == 2 * m * n * k and lg[v].launches == 1
    assert lg["unblocked"].bytes_read // lg["tiled"].bytes_read == 2 * bm * bn // (bm + bn)


def test_tiled_traffic_on_an_awkward_shape_counts_partial_tiles() -> None:
    # 129×77×200, 32×32 tiles: 5 row tiles, 3 column tiles; A read 3 times, B read 5 times.
    assert tiled_reads(129, 77, 200, 32, 32) == 129 * 200 * 3 + 200 * 77 * 5 == 154_400
    lg = MM.ledger(_params(tile=[32, 32, 32]), "float32")
    assert lg["tiled"].bytes_read == 4 * 154_400 and lg["tiled"].bytes_written == 4 * 129 * 77
    # 16×64 tiles: 9 row tiles, 2 column tiles
    assert MM.ledger(_params(tile=[16, 64, 16]), "float16")["tiled"].bytes_read == 2 * (129 * 200 * 2 + 200 * 77 * 9)


@pytest.mark.parametrize(("dtype", "s"), [("float32", 4), ("float16", 2)])
def test_epilogue_fusion_removes_one_mn_intermediate(dtype: str, s: int) -> None:
    m, n, k = 256, 128, 64
    lg = MM.ledger(_params("bias_gelu", [64, 64, 32], m=m, n=n, k=k), dtype)
    unfused, fused, library = lg["unfused"], lg["fused"], lg["library"]
    tiled = tiled_reads(m, n, k, 64, 64)
    assert (unfused.launches, fused.launches, library.launches) == (2, 1, 2)
    assert unfused.bytes_read == (tiled + m * n + n) * s and unfused.bytes_written == 2 * m * n * s
    assert fused.bytes_read == (tiled + n) * s and fused.bytes_written == m * n * s
    assert library.bytes_read == (m * k + k * n + m * n + n) * s
    assert fused.saved_bytes == 2 * m * n * s == unfused.bytes_moved(WRITE_ONCE) - fused.bytes_moved(WRITE_ONCE)
    # write-allocate: the removed write also removes its allocate read
    assert unfused.bytes_moved(WRITE_ALLOCATE) - fused.bytes_moved(WRITE_ALLOCATE) == 3 * m * n * s
    assert fused.flops == unfused.flops == 2 * m * n * k + EPILOGUE_FLOPS * m * n == 2 * m * n * k + 10 * m * n


def test_variants_for_each_epilogue_have_a_ledger() -> None:
    for epilogue, variants in VARIANTS_BY_EPILOGUE.items():
        assert MM.variants_for(_params(epilogue)) == variants
        assert set(variants) <= set(MM.ledger(_params(epilogue), "float32")) == set(MM.variants)
    assert {v for pair in MM.pairs for v in pair} <= set(MM.variants)


# Config ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"m": 0}, "scenario.m=0"),
        ({"k": 1.5}, "scenario.k=1.5"),
        ({"epilogue": "relu"}, "unknown scenario.epilogue='relu'; valid: none, bias_gelu"),
        ({"tile": [64, 64]}, r"scenario.tile=\[64, 64\] must be \[BM, BN, BK\]"),
        ({"tile": [48, 64, 32]}, "16, 32, 64, 128, 256"),
        ({"tile": 64}, "scenario.tile=64"),
        ({"m": 65536, "k": 65536}, "exceeds"),
    ],
)
def test_check_names_the_bad_value(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MM.check({**_params(), **change})


def test_presets_are_valid_and_sweep_tiles_as_lists_of_tiles() -> None:
    for preset in MM.presets.values():
        assert all(isinstance(t, list) and len(t) == 3 for t in preset["tile"])
        MM.cases(preset)


def test_emulation_params_shrink_to_odd_sides_and_keep_small_cases() -> None:
    small = MM.emulation_params(_params(m=1024, n=1024, k=1024), 4096)
    assert {small["m"], small["n"], small["k"]} == {35} and small["tile"] == [32, 32, 32]
    assert 3 * 35 * 35 <= 4096
    assert MM.emulation_params(_params(m=19, n=13, k=23), 4096) == _params(m=19, n=13, k=23)
    big = MM.emulation_params(_params(m=4096, n=4096, k=4096), 10**9)
    assert big["m"] == big["n"] == big["k"] == 63


# Tolerance ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epilogue", ["none", "bias_gelu"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tolerance_passes_a_sequential_sum_and_fails_a_dropped_k_slice(epilogue: str, dtype: str) -> None:
    params = _params(epilogue)
    inputs = MM.make_inputs(params, dtype, np.random.default_rng(SEED))
    ref = MM.reference(inputs, params)
    tol = MM.tolerance(inputs, params, dtype, ref)
    assert 1e-5 <= tol <= 0.25
    a, b, bias = (inputs[x].astype(np.float32) for x in ("a", "b", "bias"))
    for drop in (0, 16):  # a float32 sum in K order passes; one missing 16-wide slice of K does not
        acc = np.zeros(ref.shape, np.float32)
        for kk in range(params["k"] - drop):
            acc += np.outer(a[:, kk], b[kk])
        out = gelu(acc + bias) if epilogue == "bias_gelu" else acc
        err, problem = numerics.judge(out.astype(dtype), ref, tol)
        assert (problem == "") == (drop == 0), (drop, err, tol)


# Kernels on the awkward shape --------------------------------------------------------------------------

registry.discover()


def _run(key: KernelKey, params: dict, dtype: str) -> tuple[np.ndarray, np.ndarray, float]:
    target = targets.TARGETS[(key.backend, key.device)]
    if target.probe().mode not in (targets.NATIVE, targets.EMULATED):
        pytest.skip(target.probe().reason)
    inputs = MM.make_inputs(params, dtype, np.random.default_rng(SEED))
    ref = MM.reference(inputs, params)
    out = target.empty(MM.output_shape(params), dtype)
    target.poison(out)
    launch = registry.REGISTRY.get(key)({k: target.asarray(v) for k, v in inputs.items()}, out, params, {"block": 128})
    launch()
    target.synchronize()
    return np.asarray(target.to_host(out)), ref, MM.tolerance(inputs, params, dtype, ref)


CPU_AND_INTERPRETER = [
    *(KernelKey("matmul", "numba", v, "cpu") for v in ("unblocked", "tiled", "fused")),
    KernelKey("matmul", "numpy", "library", "cpu"),
    KernelKey("matmul", "torch", "library", "cpu"),
    *(KernelKey("matmul", "triton", v, "cuda") for v in ("unblocked", "tiled", "fused")),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("epilogue", ["none", "bias_gelu"])
@pytest.mark.parametrize("key", CPU_AND_INTERPRETER, ids=lambda k: f"{k.backend}-{k.device}-{k.variant}")
def test_awkward_shape_matches_reference(key: KernelKey, epilogue: str, dtype: str) -> None:
    if key.variant not in VARIANTS_BY_EPILOGUE[epilogue] and key.variant != "tiled":  # tiled + epilogue = unfused
        pytest.skip(f"{key.variant} is not compared when epilogue={epilogue}")
    params = _params(epilogue, [64, 32, 16] if key.backend == "triton" else [32, 64, 128])
    out, ref, tol = _run(key, params, dtype)
    _, problem = numerics.judge(out, ref, tol)
    assert problem == "", f"{key} {dtype} {params}: {problem}"


@pytest.mark.emulated
@pytest.mark.parametrize("tile", [[16, 16, 16], [64, 64, 64], [128, 128, 32]], ids=lambda t: "x".join(map(str, t)))
def test_simulator_runs_the_generated_register_tiles_on_67x45x33(tile: list[int]) -> None:
    """1×1 tiles over 15 blocks with two stages, 4×4 with one stage, 8×8 in one block over two K slices."""
    for variant, dtype in (("fused", "float32"), ("tiled", "float16")):
        params = {"m": 67, "n": 45, "k": 33, "epilogue": "bias_gelu", "tile": tile}
        out, ref, tol = _run(KernelKey("matmul", "numba", variant, "cuda"), params, dtype)
        _, problem = numerics.judge(out, ref, tol)
        assert problem == "", f"{variant} {dtype} {tile}: {problem}"


@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["tiled", "fused"])
def test_simulator_register_tiles_of_two_by_two(variant: str) -> None:
    params = {"m": 37, "n": 35, "k": 21, "epilogue": "bias_gelu", "tile": [32, 32, 16]}
    out, ref, tol = _run(KernelKey("matmul", "numba", variant, "cuda"), params, "float32")
    _, problem = numerics.judge(out, ref, tol)
    assert problem == "", problem


def test_fusion_keeps_float16_accuracy_the_intermediate_loses() -> None:
    """Unfused rounds A·B to float16 before bias and gelu; fused does not: its error is far smaller."""
    params = _params("bias_gelu")
    errs = {}
    for variant in ("unfused", "fused"):
        out, ref, _ = _run(KernelKey("matmul", "numba", variant, "cpu"), params, "float16")
        errs[variant] = numerics.rel_err(out, ref)
    assert errs["fused"] < errs["unfused"] / 5, errs


@pytest.mark.parametrize("backend", ["numba", "cupy"])
def test_tiles_beyond_static_shared_memory_are_refused_with_the_reason(backend: str) -> None:
    key = KernelKey("matmul", backend, "tiled", "cuda")
    target = targets.TARGETS[(backend, "cuda")]
    if target.probe().mode == targets.UNAVAILABLE:
        pytest.skip(target.probe().reason)
    # Numba has static shared memory only (48 KiB); CuPy opts in to dynamic, up to 227 KiB for two stages
    params = _params(tile=[128, 128, 64] if backend == "numba" else [64, 64, 256], m=8, n=8, k=8)
    inputs = {k: target.asarray(v) for k, v in MM.make_inputs(params, "float32", np.random.default_rng(0)).items()}
    with pytest.raises(targets.NotRunnable, match="shared memory"):
        registry.REGISTRY.get(key)(inputs, target.empty((8, 8), "float32"), params, {"block": 128})


def test_numba_cpu_unblocked_and_tiled_round_alike() -> None:
    """Both sum K in order with one FMA per product, so staging changes the traffic and not a single bit."""
    params = _params(tile=[64, 32, 64])
    unblocked, _, _ = _run(KernelKey("matmul", "numba", "unblocked", "cpu"), params, "float32")
    tiled, _, _ = _run(KernelKey("matmul", "numba", "tiled", "cpu"), params, "float32")
    assert np.array_equal(unblocked, tiled)


@pytest.mark.parametrize("tile", [[16, 16, 16], [32, 256, 64]])
def test_numba_cpu_tiled_is_bitwise_unblocked_across_tasks_slices_and_packing_blocks(tile: list[int]) -> None:
    """301 columns: 19 NR panels, more than one packing group of B, the last panel partial; K = 150 in several
    KC slices, the last partial; 67 rows: several row tasks, the last MR panel partial."""
    params = _params(tile=tile, m=67, n=301, k=150)
    unblocked, ref, tol = _run(KernelKey("matmul", "numba", "unblocked", "cpu"), params, "float32")
    tiled, _, _ = _run(KernelKey("matmul", "numba", "tiled", "cpu"), params, "float32")
    assert numerics.judge(tiled, ref, tol)[1] == ""
    assert np.array_equal(unblocked, tiled)


@pytest.mark.parametrize("epilogue", ["none", "bias_gelu"])
@pytest.mark.parametrize("lanes", WIDTHS)
def test_numba_cpu_tiled_at_every_vector_width_is_bitwise_unblocked(lanes: int, epilogue: str) -> None:
    """Each micro-kernel width (its own MR×NR and packing) on 67×301×150, whatever the host's width: the same
    bits as the unblocked loop, every output written."""
    from backends.numba.on_cpu.matmul import _tiled_launch

    params = _params(tile=[32, 64, 64], m=67, n=301, k=150)
    unblocked, _, _ = _run(KernelKey("matmul", "numba", "unblocked", "cpu"), {**params, "epilogue": "none"}, "float32")
    inputs = MM.make_inputs(params, "float32", np.random.default_rng(SEED))
    out = np.full(MM.output_shape(params), np.nan, np.float32)
    _tiled_launch(params, "float32", epilogue == "bias_gelu", "fast", inputs["a"], inputs["b"], inputs["bias"], out,
                  lanes)()  # fmt: skip
    if epilogue == "none":
        np.testing.assert_array_equal(out, unblocked)
    else:  # the epilogue on the same accumulators as the host-width fused kernel
        fused, _, _ = _run(KernelKey("matmul", "numba", "fused", "cpu"), {**params, "epilogue": epilogue}, "float32")
        np.testing.assert_array_equal(out, fused)


@pytest.mark.parametrize("epilogue", [False, True])
def test_numba_cpu_tiled_stores_its_block_without_gathers_or_scatters(epilogue: bool) -> None:
    """The block's store loop (with the bias+gelu epilogue or without) indexes slices from 0: indexed from the
    block's corner, Numba's negative-index wraparound made LLVM gather the bias and scatter C, and the fused
    epilogue cost three times a separate pass."""
    import re

    from backends.numba.on_cpu.matmul import _tiled_kernel, _tiled_launch
    from backends.numba.on_cpu.vector_width import HOST_LANES

    params = _params(epilogue="bias_gelu" if epilogue else "none", tile=[32, 64, 64], m=67, n=301, k=150)
    inputs = MM.make_inputs(params, "float32", np.random.default_rng(SEED))
    out = np.empty(MM.output_shape(params), np.float32)
    _tiled_launch(params, "float32", epilogue, "fast", inputs["a"], inputs["b"], inputs["bias"], out)
    (asm,) = _tiled_kernel(32, 64, 64, "float32", epilogue, "fast", HOST_LANES).inspect_asm().values()
    assert not re.search(r"\bv(gather|scatter)", asm)
    assert re.search(r"\bvmovups\s+%[yz]mm\d+, ", asm)  # vector stores: the check can see a vector loop
