"""On a CUDA device (`nox -s gpu`; skipped elsewhere): the launch limits the host checks are the device's own.

The grid limits `grid_problem` assumes are the device's attributes, and a launch one block past them really
fails; an attention case with more batch·heads than grid y holds is a skipped row with the reason in every
CUDA backend, and one at the limit runs and is right. Triton's flash kernel over the opt-in shared memory is
refused when it is built, not at its first launch. CuPy's normalization kernels, bounded to their block, load
with 1024 threads and compute the right numbers. The host-side half is tests/test_launch_limits.py.
"""

from __future__ import annotations

import json

import pytest

from suite.core.targets import NotRunnable
from suite.kit.launch import GRID_LIMITS, grid_problem
from suite.run.runner import run
from tests.conftest import make_config

pytestmark = pytest.mark.gpu

ATTENTION = ["scenario=attention", "scenario.heads=[1]", "scenario.kv_heads=[1]", "scenario.seq_len=[17]",
             "scenario.head_dim=[16]", "scenario.causal=[true]", "scenario.block_m=[16]", "scenario.block_n=[16]",
             "timing=quick", "device=cuda", "dtype=float32", "backends=[cupy,triton,numba]", "variants=[fused,unfused]",
             "isolate=false"]  # fmt: skip


def test_the_grid_limits_are_the_devices() -> None:
    cupy = pytest.importorskip("cupy")
    attributes = cupy.cuda.Device().attributes
    assert (attributes["MaxGridDimX"], attributes["MaxGridDimY"], attributes["MaxGridDimZ"]) == GRID_LIMITS
    noop = cupy.RawKernel('extern "C" __global__ void noop() {}', "noop")
    assert grid_problem((1, 65535)) is None
    noop((1, 65535), (1,), ())
    cupy.cuda.Device().synchronize()
    assert grid_problem((1, 65536)) is not None
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="INVALID_VALUE"):  # not a sticky error
        noop((1, 65536), (1,), ())
        cupy.cuda.Device().synchronize()


@pytest.mark.parametrize(("batch", "runs"), [(65535, True), (65536, False)])
def test_attention_at_and_past_grid_y(batch: int, runs: bool, tmp_path) -> None:
    rows = run(make_config(*ATTENTION, f"scenario.batch=[{batch}]"), tmp_path, show_progress=False).table
    cuda = rows[rows["device"] == "cuda"]
    assert len(cuda) == 6 and (cuda["mode"] == "native").all(), cuda[["backend", "variant", "mode", "reason"]]
    if runs:
        assert (cuda["status"] == "ok").all(), cuda[["backend", "variant", "status", "reason"]].to_string()
        return
    assert (cuda["status"] == "skipped").all(), cuda[["backend", "variant", "status", "reason"]].to_string()
    assert cuda["reason"].str.contains("grid y = batch·heads = 65536 exceeds CUDA's 65535").all()


def _flash(head_dim: int, block_m: int, block_n: int) -> tuple[object, object, object]:
    """Triton's fused entry for a float32 case of these tiles on the device: (launcher, output, q = k = v)."""
    import torch

    from backends.triton.attention import fused

    x = torch.randn((1, 2, 193, head_dim), device="cuda")
    out = torch.full_like(x, float("nan"))
    params = {"batch": 1, "heads": 2, "seq_len": 193, "head_dim": head_dim, "causal": True, "block_m": block_m,
              "block_n": block_n}  # fmt: skip
    return fused({"q": x, "k": x, "v": x}, out, params, {}), out, x


def test_triton_flash_fits_the_opt_in_limit_or_is_refused_at_build() -> None:
    import torch

    from backends.triton.launch import SMEM_OPTIN, smem_optin

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    assert smem_optin() == props.shared_memory_per_block_optin
    if (props.major, props.minor) == (9, 0):
        assert smem_optin() == SMEM_OPTIN
    with pytest.raises(NotRunnable, match=rf"bytes of shared memory .* over the {smem_optin():,} a block"):
        _flash(256, 128, 128)  # over the limit at one stage already
    for tiles, stages in (((64, 64), 3), ((256, 128), 1)):  # 256×128: over at the rule's two stages, in at one
        launcher, out, x = _flash(64, *tiles)
        assert launcher.notes["launch"]["flash_kernel"]["num_stages"] == stages, launcher.notes
        launcher()
        torch.cuda.synchronize()
        want = torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True)
        assert torch.allclose(out, want, atol=1e-4, rtol=1e-4), (tiles, (out - want).abs().max())


def test_cupy_normalization_kernels_load_and_run_with_1024_threads(tmp_path) -> None:
    pytest.importorskip("cupy")
    from backends.cupy.build import build
    from backends.cupy.normalization_kernels import fused_source, step_source
    from scenarios.normalization import DECOMPOSITIONS

    ops = sorted({st.op for steps in DECOMPOSITIONS.values() for st in steps})
    for dtype in ("float32", "float16"):
        sources = [fused_source(op, dtype, 16384, 1024) for op in DECOMPOSITIONS]
        for source in sources + [step_source(op, dtype, 16384, 1024) for op in ops]:
            assert build(*source).attributes["max_threads_per_block"] >= 1024, source[1]
    for family in DECOMPOSITIONS:
        cfg = make_config(f"scenario={family}", "scenario.rows=[33]", "scenario.cols=[4097,16384]",
                          "scenario.tile=[16384]", "backends=[cupy]", "+backend_options.cupy.block=1024",
                          "timing=quick", "device=cuda", "dtype=[float32,float16]", "isolate=false")  # fmt: skip
        rows = run(cfg, tmp_path / family, show_progress=False).table
        cuda = rows[(rows["device"] == "cuda") & rows["variant"].isin(["fused", "unfused"])]
        assert len(cuda) == 8 and (cuda["status"] == "ok").all(), cuda[["variant", "status", "reason"]].to_string()
        assert all(json.loads(extra)["launch"]["threads"] == 1024 for extra in cuda["extra"]), cuda["extra"].tolist()
