"""CUDA's launch limits are checked on the host, before any work: a refused launch is a skipped row with a reason.

Grid y holds batch·heads in every CUDA attention kernel, and CUDA launches at most 65535 blocks along y (x may
reach 2³¹−1): `suite.kit.launch.grid_problem` says so, and each attention entry (Triton in its interpreter,
Numba CUDA in the simulator, CuPy compile-only) refuses such a case before it reads an input, allocates S or
compiles a kernel. Triton's flash kernel at float32, head_dim 256 and 128×128 tiles needs more shared memory
than an H100/H200 block can opt in to; the check the launcher applies to the compiled kernel refuses it. The
device-side half of each claim is in tests/test_gpu_launch_limits.py.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from suite.core.targets import NotRunnable
from suite.kit.launch import GRID_LIMITS, grid_problem, require_grids
from tests.support import json_lines, missing, run_without_emulation

# The pure check ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grid", "problem"),
    [
        ((1, 65535), None),
        ((2**31 - 1,), None),
        ((2**31 - 1, 65535, 65535), None),
        ((1, 65536), "grid y = 65536 exceeds CUDA's 65535"),
        ((2**31,), "grid x = 2147483648 exceeds CUDA's 2147483647"),
        ((1, 1, 65536), "grid z = 65536 exceeds CUDA's 65535"),
        ((3, 0), "grid y = 0: CUDA launches no empty grid"),
        ((1, 1, 1, 1), "a grid has 1 to 3 dimensions, not 4"),
    ],
)
def test_grid_problem_at_the_edges(grid: tuple[int, ...], problem: str | None) -> None:
    assert grid_problem(grid) == problem


def test_grid_problem_names_what_a_dimension_counts() -> None:
    assert GRID_LIMITS == (2**31 - 1, 65535, 65535)
    heads = grid_problem((4, 70000), ("query tiles", "batch·heads"))
    assert heads == "grid y = batch·heads = 70000 exceeds CUDA's 65535"
    assert grid_problem((2**31, 1), ("rows",)) == "grid x = rows = 2147483648 exceeds CUDA's 2147483647"
    with pytest.raises(NotRunnable, match=r"^k: grid y = 65536 exceeds CUDA's 65535; use fewer$"):
        require_grids("k", [((1, 2), ()), ((1, 65536), ())], "use fewer")
    require_grids("k", [((2**31 - 1, 65535), ())], "never said")


# Every attention entry refuses before it touches anything -------------------------------------------------------

ENTRIES = {
    "triton": ("backends.triton.attention", "triton attention", ("triton", "torch")),
    "cupy": ("backends.cupy.attention", "cupy attention", ("cupy",)),
    "numba": ("backends.numba.on_cuda.attention", "numba/cuda attention", ("numba_cuda",)),
}
BACKENDS = [pytest.param(b, marks=pytest.mark.skipif(bool(missing(*m)), reason=missing(*m))) for b, (_, _, m) in
            ENTRIES.items()]  # fmt: skip
CASE = {"batch": 1, "heads": 1, "seq_len": 1, "head_dim": 16, "causal": True, "block_m": 16, "block_n": 16}


class Untouchable:
    """Stands for the inputs and the output: any use of it fails the test, so a refusal that the entry raises
    provably comes before it reads an input, allocates an intermediate or compiles for the output's dtype."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the entry used .{name} before refusing")

    def __getitem__(self, key: Any) -> Any:
        raise AssertionError(f"the entry read [{key!r}] before refusing")


def _entry(backend: str, variant: str) -> Any:
    return getattr(importlib.import_module(ENTRIES[backend][0]), variant)


@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("batch", "heads"), [(1, 65536), (256, 256), (7, 10000)])
def test_attention_refuses_more_heads_than_grid_y_holds(backend: str, variant: str, batch: int, heads: int) -> None:
    params = {**CASE, "batch": batch, "heads": heads, "seq_len": 193}
    with pytest.raises(NotRunnable) as refused:
        _entry(backend, variant)(Untouchable(), Untouchable(), params, {})
    reason = str(refused.value)
    assert reason.startswith(f"{ENTRIES[backend][1]}: grid y = batch·heads = {batch * heads} exceeds CUDA's 65535; ")
    assert "lower batch or heads" in reason and "\n" not in reason


def _arrays(backend: str, shape: tuple[int, ...]) -> tuple[dict[str, Any], Any]:
    """Tiny q, k, v and out on the backend's emulated or compile-only device (the entry launches nothing)."""
    if backend == "triton":
        import torch

        x = torch.zeros(shape, dtype=torch.float32)
        return {"q": x, "k": x, "v": x}, x.clone()
    x = np.zeros(shape, np.float32)
    return {"q": x, "k": x, "v": x}, x.copy()


@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_builds_at_the_largest_grid_y(backend: str, variant: str) -> None:
    """65535 heads of one query: the entry builds (compiles where it can, never launches) on grid (1, 65535)."""
    inputs, out = _arrays(backend, (65535, 1, 1, 16))
    launcher = _entry(backend, variant)(inputs, out, {**CASE, "heads": 65535}, {})
    grids = [k["grid"] for k in launcher.notes["launch"].values() if isinstance(k, dict)]
    assert [1, 65535] in grids, grids


# Triton's shared memory against what a block can opt in to ------------------------------------------------------


def test_shared_memory_problem_names_the_bytes_the_limit_and_the_remedy() -> None:
    from backends.triton.launch import SMEM_OPTIN, shared_memory_problem

    assert SMEM_OPTIN == 232_448  # 227 KiB: sm_90's opt-in maximum per block, as the occupancy table has it
    assert shared_memory_problem(SMEM_OPTIN, SMEM_OPTIN, 1) is None
    why = shared_memory_problem(SMEM_OPTIN + 1, SMEM_OPTIN, 1)
    assert why is not None and "232,449 bytes" in why and "232,448" in why and "block_m or block_n" in why


class Compiles:
    """A Triton kernel as `_fit` sees it on a GPU: `warmup` returns a compiled kernel whose shared memory is
    `shared_at[num_stages]`, and the stages asked for are kept."""

    def __init__(self, shared_at: dict[int, int]) -> None:
        self.fn = SimpleNamespace(__name__="_flash_kernel")
        self.shared_at, self.tried = shared_at, []

    def warmup(self, *args: Any, grid: tuple[int, ...], num_stages: int, **kwargs: Any) -> Any:
        self.tried.append(num_stages)
        return SimpleNamespace(metadata=SimpleNamespace(shared=self.shared_at[num_stages]))


def _fit(shared_at: dict[int, int], stages: int) -> tuple[Compiles, dict[str, int]]:
    from backends.triton.attention import _fit as fit

    kernel = Compiles(shared_at)
    _, opts = fit(kernel, (4, 2), (), {}, {"num_warps": 16, "num_stages": stages})
    return kernel, opts


@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_kernels_drop_stages_until_they_fit_and_are_refused_at_one() -> None:
    """The compiled sizes of tests below (float32 flash kernels for sm_90); this process has no GPU, so the
    limit is sm_90's."""
    kernel, opts = _fit({2: 263_168, 1: 230_400}, 2)
    assert kernel.tried == [2, 1] and opts == {"num_warps": 16, "num_stages": 1}
    kernel, opts = _fit({3: 98_304}, 3)
    assert kernel.tried == [3] and opts["num_stages"] == 3
    with pytest.raises(NotRunnable) as refused:
        _fit({1: 328_192}, 1)
    assert str(refused.value) == (
        "triton attention: flash_kernel needs 328,192 bytes of shared memory per block at num_stages=1, over the "
        "232,448 a block can opt in to on this GPU; use smaller block_m or block_n"
    )


FLASH_SCRIPT = """
import json, sys, triton
from backends.triton import attention as A
from tests.sm90 import TARGET

for case in sys.argv[1:]:
    dtype, head_dim, block_m, block_n, stages = case.split(",")
    ty = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]
    consts = A.tile_constants({"head_dim": int(head_dim), "causal": False, "block_m": int(block_m),
                               "block_n": int(block_n)})
    options = A.tiled_options(consts, dtype, {}) | ({"num_stages": int(stages)} if stages else {})
    signature = {**{p: f"*{ty}" for p in ("Q", "K", "V", "Out")}, "seq_len": "i32", "group": "i32", "scale": "fp32",
                 **dict.fromkeys(consts, "constexpr")}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    src = triton.compiler.ASTSource(fn=A._flash_kernel, signature=signature, attrs=aligned, constexprs=consts)
    k = triton.compile(src, target=TARGET, options=options)
    print(json.dumps({"case": case, "stages": options["num_stages"], "shared": k.metadata.shared}))
"""
FLASH_CASES = {
    "over at one stage": "float32,256,128,128,",
    "over at the rule's stages": "float32,64,256,128,",
    "in at one stage": "float32,64,256,128,1",
    "float32 preset": "float32,64,64,64,",
    "float16 preset": "float16,64,64,64,",
    "bfloat16 preset": "bfloat16,64,64,64,",
}
"""dtype, head_dim, block_m, block_n and num_stages (empty: the ones `attention_config` picks)."""


@pytest.mark.compile
@pytest.mark.skipif(bool(missing("triton", "torch")), reason=missing("triton", "torch"))
def test_triton_flash_shared_memory_against_the_opt_in_limit() -> None:
    """Compiled for sm_90 at the warps and stages `attention_config` picks: float32 at head_dim 256 with 128×128
    tiles needs more shared memory than a block may opt in to, already at one stage, and is refused; 256×128
    tiles at head_dim 64 are over at the rule's two stages and fit at one, which `_fit` then picks; the presets'
    tiles fit as they are, in every dtype."""
    from backends.triton.launch import SMEM_OPTIN, shared_memory_problem

    proc = run_without_emulation(FLASH_SCRIPT, *FLASH_CASES.values(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = dict(zip(FLASH_CASES, json_lines(proc.stdout), strict=True))
    big = found["over at one stage"]
    assert big["stages"] == 1 and big["shared"] > SMEM_OPTIN, big
    assert f"{big['shared']:,} bytes" in (shared_memory_problem(big["shared"], SMEM_OPTIN, 1) or ""), big
    over, fits = found["over at the rule's stages"], found["in at one stage"]
    assert over["stages"] == 2 and over["shared"] > SMEM_OPTIN >= fits["shared"], (over, fits)
    assert _fit({2: over["shared"], 1: fits["shared"]}, 2)[1]["num_stages"] == 1
    for name in ("float32 preset", "float16 preset", "bfloat16 preset"):
        assert shared_memory_problem(found[name]["shared"], SMEM_OPTIN, found[name]["stages"]) is None, found[name]
