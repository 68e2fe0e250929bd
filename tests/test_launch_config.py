"""Launch settings chosen per shape: the rules' choices, the numerics at each choice, and the options winning.

The rules (`backends.triton.launch`, `suite.kit.launch_shape`) are plain functions, so their choices are pinned
for shapes that would catch a regression: powers of two, odd sizes, a single element, rows wider than the
largest tile. Every distinct elementwise block the rule picks is then run in the Triton interpreter (and the Numba
CUDA grid-stride loop in the simulator, on a grid small enough that each thread loops), against the float64
reference into NaN-poisoned outputs, and the launcher's notes must say what ran and why.
"""

from __future__ import annotations

import numpy as np
import pytest

from backends.triton.launch import MAX_BLOCK, attention_config, chain_config, row_warps
from suite.core import numerics, targets
from suite.core.registry import REGISTRY, KernelKey, discover
from suite.core.scenario import get
from suite.kit.launch import row_threads
from suite.kit.launch_shape import (
    FLAT_THREADS,
    MIN_FLAT_THREADS,
    NOMINAL,
    WAVES,
    Device,
    block_chosen_by,
    chosen_by,
    elementwise_launch,
    flat_threads,
    launch_notes,
)

discover()
SEED = 20261203
SMS = NOMINAL.sms


# The rules' choices ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "block", "warps"),
    [
        (1, 16, 1),  # one element: the smallest program
        (5, 16, 1),
        (1000, 128, 1),  # too few for a program per SM at any block: the smallest block
        (40_000, 256, 1),  # 157 programs of 256 fill the SMs; 79 of 512 would not
        (SMS * 1024, 1024, 4),  # exactly a program per SM at the largest block
        ((SMS - 1) * 1024, 512, 2),  # one program short of an SM each: half the block
        (2**24 + 3, 1024, 4),  # odd and large
    ],
)
def test_chain_block_and_warps_follow_n(n: int, block: int, warps: int) -> None:
    assert chain_config(n, {}, SMS) == {"block": block, "num_warps": warps}


def test_chain_options_win() -> None:
    assert chain_config(10, {"block": 4096}, SMS) == {"block": 4096, "num_warps": 4}
    assert chain_config(2**24, {"num_warps": 8}, SMS) == {"block": MAX_BLOCK, "num_warps": 8}
    assert chain_config(2**24, {"block": 256, "num_warps": 2}, SMS) == {"block": 256, "num_warps": 2}


@pytest.mark.parametrize(("tile", "warps"), [(1, 1), (32, 1), (256, 1), (512, 2), (1024, 4), (2048, 8), (4096, 16),
                                             (16384, 16)])  # fmt: skip
def test_row_warps_follow_the_tile(tile: int, warps: int) -> None:
    assert row_warps(tile, {}) == warps
    assert row_warps(tile, {"num_warps": 2}) == 2


def test_rows_wider_than_the_largest_tile_keep_its_warps() -> None:
    from suite.kit.launch import chunk_columns

    tile = chunk_columns(100_003, 16384)
    assert tile == 16384 and row_warps(tile, {}) == 16
    assert row_warps(chunk_columns(781, 4096), {}) == 4  # 1024 columns held for 781


@pytest.mark.parametrize(
    ("tiles", "dtype", "warps", "stages"),
    [
        ((64, 64, 64), "float16", 4, 4),  # the presets: as before (4 warps), 4 stages for head_dim 64
        ((128, 128, 64), "float16", 8, 4),  # the tutorial keeps 8 warps only from 128×128
        ((64, 64, 128), "float16", 4, 3),
        ((256, 256, 256), "float16", 8, 1),  # K and V tiles of 256 KiB: no room to pipeline
        ((64, 64, 64), "float32", 8, 3),  # FMA products: 8 warps hold 12288 tile values, 48 each
        ((16, 16, 16), "float32", 4, 3),
        ((128, 128, 128), "float32", 16, 1),
    ],
)
def test_attention_warps_and_stages(tiles: tuple[int, int, int], dtype: str, warps: int, stages: int) -> None:
    assert attention_config(*tiles, dtype, {}) == {"num_warps": warps, "num_stages": stages}
    assert attention_config(*tiles, dtype, {"num_warps": 2})["num_warps"] == 2


@pytest.mark.parametrize(
    ("n", "threads", "device", "expected"),
    [
        (0, 256, NOMINAL, (32, 1)),  # empty: still one valid block
        (10, 256, NOMINAL, (32, 1)),  # a warp, one element per thread
        (100, 256, NOMINAL, (128, 1)),
        (1000, 256, NOMINAL, (256, 4)),
        (2**30, 256, NOMINAL, (256, WAVES * 8 * SMS)),  # capped: 4 waves of 8 resident blocks per SM
        (2**30, 1024, Device(1, 2048, "test"), (1024, WAVES * 2)),
        (2**30, 1024, Device(1, 512, "test"), (1024, WAVES)),  # a block larger than an SM holds: one at a time
    ],
)
def test_cuda_elementwise_grid(n: int, threads: int, device: Device, expected: tuple[int, int]) -> None:
    assert elementwise_launch(n, threads, device) == expected


@pytest.mark.parametrize(
    ("n", "threads"),
    [
        (1, 32),  # no more than n rounded up to a warp
        (1000, MIN_FLAT_THREADS),  # too few for a block per SM at any size: the smallest that can fill an SM
        (FLAT_THREADS * SMS, FLAT_THREADS),  # exactly a block per SM at the largest size
        (FLAT_THREADS * (SMS - 1), FLAT_THREADS // 2),  # one block short: half the threads, every SM busy
        (40_000, 256),
        (20_000, 128),
        (2**26 + 1, FLAT_THREADS),
    ],
)
def test_cuda_block_follows_n_where_no_option_sets_it(n: int, threads: int) -> None:
    assert flat_threads(n, None) == threads
    assert elementwise_launch(n, None)[0] == threads
    assert -(-n // threads) >= SMS or threads <= MIN_FLAT_THREADS  # every SM has a block, down to the floor


def test_cuda_block_option_wins_and_is_capped_by_n() -> None:
    assert flat_threads(2**26, 512) == 512 and flat_threads(10, 512) == 32
    assert flat_threads(40_000, None, Device(4, 2048, "test")) == 256  # few SMs: no reason to shrink


@pytest.mark.parametrize(("chunk", "threads"), [(1, 32), (64, 32), (1024, 128), (2048, 256), (4096, 512),
                                                (16384, 1024)])  # fmt: skip
def test_cuda_row_threads_follow_the_chunk_like_triton_row_warps(chunk: int, threads: int) -> None:
    """Eight columns a thread, as Triton's row programs hold (row_warps: a warp per 256 columns)."""
    assert row_threads(chunk, None) == threads
    assert threads == max(32, row_warps(chunk, {}) * 32) or chunk > 4096  # Triton stops at 16 warps
    assert row_threads(4096, 256) == 256  # the option wins


def test_chosen_by_names_who_chose() -> None:
    assert block_chosen_by(None) == "shape" and block_chosen_by(64) == "option+shape"
    assert chosen_by({}, ("block", "num_warps")) == "shape"
    assert chosen_by({"block": 64, "num_warps": None}, ("block", "num_warps")) == "option+shape"
    assert chosen_by({"block": 64, "num_warps": 2}, ("block", "num_warps")) == "option"
    assert launch_notes({"block": 8}, 3, "shape") == {"launch": {"block": 8, "grid": [3], "chosen_by": "shape"}}


# Numerics at each configuration the rules pick -------------------------------------------------------------------


def _run(scenario: str, backend: str, variant: str, params: dict, dtype: str, opts: dict) -> tuple[dict, str]:
    """Run an entry into a NaN-poisoned output; (its launch notes, the judge's complaint or "")."""
    scn, target = get(scenario), targets.TARGETS[(backend, "cuda")]
    if not target.probe().runs:
        pytest.skip(f"{backend}: {target.probe().reason}")
    inputs = scn.make_inputs(params, dtype, np.random.default_rng(SEED))
    ref = scn.reference(inputs, params)
    out = target.empty(scn.output_shape(params), dtype)
    target.poison(out)
    entry = REGISTRY.get(KernelKey(scenario, backend, variant, "cuda"))
    launch = entry({k: target.asarray(v) for k, v in inputs.items()}, out, params, {"stream": None, **opts})
    launch()
    target.synchronize()
    _, problem = numerics.judge(np.asarray(target.to_host(out)), ref, scn.tolerance(inputs, params, dtype, ref))
    return launch.notes["launch"], problem


@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize(("n", "block"), [(5, 16), (1000, 128), (40_000, 256), (SMS * 1024 + 7, 1024)])
def test_triton_chain_at_each_chosen_block(variant: str, n: int, block: int) -> None:
    pytest.importorskip("triton")
    dtype = "float16" if n % 2 else "float32"
    notes, problem = _run("elementwise_chain", "triton", variant, {"n": n, "ops": ["scale", "gelu"]}, dtype, {})
    assert not problem, f"n={n}: {problem}"
    assert notes["block"] == block and notes["chosen_by"] == "shape"
    assert notes["grid"] == [-(-n // block)]


@pytest.mark.emulated
def test_triton_chain_options_override() -> None:
    pytest.importorskip("triton")
    params = {"n": 1000, "ops": ["tanh"]}
    notes, problem = _run("elementwise_chain", "triton", "fused", params, "float32", {"block": 64, "num_warps": 2})
    assert not problem
    assert (notes["block"], notes["num_warps"], notes["grid"], notes["chosen_by"]) == (64, 2, [16], "option")


@pytest.mark.emulated
@pytest.mark.parametrize("op", ["layernorm", "softmax"])
@pytest.mark.parametrize(
    ("cols", "tile", "warps"),
    [(33, 64, 1), (700, 1024, 4), (3000, 4096, 16), (5003, 1024, 4)],  # one tile of each width; a walked row
)
def test_triton_rows_at_each_chosen_width(op: str, cols: int, tile: int, warps: int) -> None:
    pytest.importorskip("triton")
    params = {"rows": 3, "cols": cols, "tile": tile}
    notes, problem = _run(op, "triton", "fused", params, "float32", {})
    assert not problem, f"{op} cols={cols}: {problem}"
    assert (notes["num_warps"], notes["grid"], notes["chosen_by"]) == (warps, [3], "shape")
    notes, _ = _run(op, "triton", "unfused", params, "float16", {"num_warps": 8})
    assert (notes["num_warps"], notes["chosen_by"]) == (8, "option")


@pytest.mark.emulated
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_triton_attention_records_warps_and_stages(dtype: str) -> None:
    pytest.importorskip("triton")
    params = {"batch": 1, "heads": 2, "seq_len": 37, "head_dim": 24, "causal": True, "block_m": 16, "block_n": 32}
    notes, problem = _run("attention", "triton", "unfused", params, dtype, {})
    assert not problem
    assert notes["scores_kernel"] == {**attention_config(16, 32, 32, dtype, {}), "grid": [3, 2]}
    assert notes["softmax_kernel"] == {"num_warps": 1, "grid": [74]}  # chunks of 64 keys: one warp
    notes, problem = _run("attention", "triton", "fused", params, dtype, {"num_warps": 2})
    assert not problem and notes["flash_kernel"]["num_warps"] == 2 and notes["chosen_by"] == "option"


@pytest.mark.emulated
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_numba_cuda_grid_stride_loop(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device of one small SM caps the grid at 8 blocks of 32: each thread then walks four elements."""
    pytest.importorskip("numba_cuda")
    from backends.numba.on_cuda import elementwise_chain as chain

    monkeypatch.setattr(chain, "device", lambda: Device(1, 64, "test"))
    notes, problem = _run("elementwise_chain", "numba", variant, {"n": 1001, "ops": ["square", "shift"]}, "float32",
                          {"block": 32})  # fmt: skip
    assert not problem
    assert (notes["block"], notes["grid"], notes["chosen_by"]) == (32, [WAVES * 2], "option+shape")


@pytest.mark.emulated
def test_numba_cuda_block_from_the_shape_is_recorded() -> None:
    """No option: 3000 elements are too few for a block per SM of any size, so the smallest blocks, one element
    each."""
    pytest.importorskip("numba_cuda")
    notes, problem = _run("elementwise_chain", "numba", "fused", {"n": 3000, "ops": ["square", "shift"]}, "float32", {})
    assert not problem
    assert (notes["block"], notes["grid"], notes["chosen_by"]) == (64, [-(-3000 // 64)], "shape")


# The chosen attention settings compile for sm_90 in registers ----------------------------------------------------

ATTENTION_SCRIPT = """
import json
from backends.triton import attention as A
from tests.sm90 import aligned, compile_sm90

# bfloat16 at the preset's head_dim only (its products take float16's tensor-core path); `attention_config` gives
# it float32's warps and stages, as for any dtype but float16.
cases = (("float32", "fp32", 64), ("float16", "fp16", 64), ("float16", "fp16", 128), ("bfloat16", "bf16", 64))
for dtype, ty, head_dim in cases:
    consts = A.tile_constants({"head_dim": head_dim, "causal": True, "block_m": 64, "block_n": 64})
    options = A.tiled_options(consts, dtype, {})
    signature = {**{p: f"*{ty}" for p in ("Q", "K", "V", "Out")}, "seq_len": "i32", "group": "i32", "scale": "fp32",
                 **dict.fromkeys(consts, "constexpr")}
    k, log = compile_sm90(A._flash_kernel, signature, consts, options, aligned(range(4)))
    print(json.dumps({"case": f"{dtype} d={head_dim} {options}", "shared": k.metadata.shared, "ptxas": log}))
"""


@pytest.mark.compile
def test_triton_attention_settings_compile_without_spills() -> None:
    """The flash kernel at the warps and stages the rule picks: no spills, and its pipeline fits shared memory."""
    pytest.importorskip("triton")
    from backends.triton.launch import SMEM_BUDGET
    from suite.gpu.ptxas import parse_ptxas
    from tests.support import json_lines, run_without_emulation

    proc = run_without_emulation(ATTENTION_SCRIPT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json_lines(proc.stdout)
    assert len(rows) == 4
    for row in rows:
        (r,) = parse_ptxas(row["ptxas"]).values()
        assert r.registers > 0 and r.spill_bytes == 0 and r.stack_bytes == 0, f"{row['case']}: {r}"
        assert row["shared"] <= SMEM_BUDGET + 64 * 1024, row  # the K and V buffers plus the converted tiles
