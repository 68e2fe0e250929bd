"""On a CUDA device (`nox -s gpu`; skipped elsewhere): every hand-written CUDA kernel's numerics on awkward shapes,
the suite's timer against triton.testing.do_bench, the read flush's effect on L2, and graph capture of real
launchers. Each runs the suite's own machinery in this process, natively (tests/conftest.py turns emulation off
under FUSEBENCH_GPU_TESTS=1)."""

from __future__ import annotations

import pytest

from suite.run.runner import run
from tests.conftest import make_config

pytestmark = pytest.mark.gpu

AWKWARD = {
    "elementwise_chain": ["scenario.n=[1000003]"],
    "layernorm": ["scenario.rows=[33]", "scenario.cols=[781,4097]"],
    "rmsnorm": ["scenario.rows=[33]", "scenario.cols=[781,4097]"],
    "softmax": ["scenario.rows=[33]", "scenario.cols=[1,781,8193]"],
    "attention": ["scenario.seq_len=[193]", "scenario.head_dim=[64]", "scenario.causal=[false,true]"],
    "matmul": ["scenario.m=[257]", "scenario.n=[129]", "scenario.k=[65]"],
    "add_rmsnorm": ["scenario.rows=[33]", "scenario.cols=[193,781]", "scenario.tile=[256]"],
    "swiglu": ["scenario.rows=[33]", "scenario.cols=[193,4097]"],
    "rope": ["scenario.seq_len=[33]", "scenario.heads=[4]", "scenario.kv_heads=[2]", "scenario.head_dim=[64]",
             "scenario.pairing=[half,interleaved]"],
    "cross_entropy": ["scenario.tokens=[33]", "scenario.vocab=[781,5003]", "scenario.tile=[1024]"],
    "linear_cross_entropy": ["scenario.tokens=[33]", "scenario.hidden=[64]", "scenario.vocab=[781]",
                             "scenario.chunk=[8]", "scenario.tile=[256]"],
    "decoder_layer": ["scenario.tokens=[65]", "scenario.hidden=[100]", "scenario.heads=[3]", "scenario.kv_heads=[1]",
                      "scenario.head_dim=[64]", "scenario.intermediate=[130]"],
}  # fmt: skip
"""Shapes no tile divides: the tails, masks and bounds checks of every hand-written CUDA kernel, for every family
in the tree (tests/test_gpu_check_plan.py holds it to the registry)."""
HAND_WRITTEN = "backends=[triton,cupy,numba]"
"""The kernels whose tails are this suite's: torch's rivals (eager, compiled, library) are checked in the GPU
check's sweep, at its shapes, where a torch.compile per awkward shape and dtype would cost most of this test."""


@pytest.mark.parametrize("family", sorted(AWKWARD))
def test_every_cuda_kernel_is_right_on_the_device(family: str, tmp_path) -> None:
    cfg = make_config(f"scenario={family}", "preset=S", *AWKWARD[family], HAND_WRITTEN, "timing=quick",
                      "device=cuda", "dtype=[float32,float16]", "isolate=false")  # fmt: skip
    rows = run(cfg, tmp_path, show_progress=False).table
    cuda = rows[rows["device"] == "cuda"]
    assert len(cuda) and (cuda["mode"] == "native").all(), cuda[["backend", "variant", "mode", "reason"]]
    bad = cuda[~cuda["status"].isin(["ok", "unsupported"])]
    assert bad.empty, bad[["backend", "variant", "dtype", "params", "status", "reason"]].to_string()
    assert (cuda.loc[cuda["status"] == "ok", "max_rel_err"] <= cuda.loc[cuda["status"] == "ok", "tolerance"]).all()


def _torch_on_shared_stream():
    import torch

    from suite.gpu import driver

    return torch, torch.cuda.ExternalStream(driver.shared_stream())


def test_the_event_timer_agrees_with_triton_do_bench_on_a_large_copy() -> None:
    """Both flush alike: do_bench zeroes a 256 MB buffer before each repetition (dirty lines the copy's window
    then writes back), so here our clock flushes with the very same buffer instead of its clean read flush."""
    import numpy as np
    import triton
    import triton.testing

    from suite.run.timing import CudaClock

    torch, stream = _torch_on_shared_stream()
    with torch.cuda.stream(stream):
        src = torch.rand(1 << 26, device="cuda")
        dst = torch.empty_like(src)
        cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
        clock = CudaClock()
        clock.flush = lambda _stream: cache.zero_()  # do_bench's own flush, on the shared stream
        ours = float(np.median([clock.time(lambda: dst.copy_(src)) for _ in range(50)]))
        theirs = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    assert abs(ours / theirs - 1) < 0.10, (ours, theirs)


def test_the_flush_leaves_l2_cold_and_clean() -> None:
    """Every window has the spin ahead of its start event, as the timer's own do: without it the warm window
    would hold the host's dispatch of torch.sum (5–15 µs) while the cold one, queued behind a long read, would
    not."""
    import numpy as np

    from suite.gpu import driver
    from suite.run.timing import CudaClock

    torch, stream = _torch_on_shared_stream()
    clock = CudaClock()
    l2 = driver.l2_bytes()
    with torch.cuda.stream(stream):
        small = torch.rand(l2 // 16, device="cuda")  # a quarter of L2: warm, it is served from L2
        other = torch.rand(l2, device="cuda")  # 4 × L2 of another buffer: what a cold read follows
        out = torch.empty(1, device="cuda")

        def read() -> None:
            torch.sum(small, out=out)

        start, end = driver.Event(), driver.Event()

        def window(before) -> float:
            before()
            driver.spin(clock.stream, 200_000)  # 200 µs: far longer than the host's dispatch of one torch.sum
            start.record(clock.stream)
            read()
            end.record(clock.stream)
            return start.elapsed_ms(end)

        warm = np.median([window(read) for _ in range(30)])
        cold = np.median([window(lambda: torch.sum(other, out=out)) for _ in range(30)])
        flushed = np.median([window(lambda: clock.flush(clock.stream)) for _ in range(30)])
    assert flushed >= 0.9 * cold, (flushed, cold, warm)  # the flush evicts as well as a cold read
    assert cold > warm, (cold, warm)  # the measurement can tell L2 from DRAM at all


SWEEP_CONFIGURATIONS = {
    "normalization tile 4096 (16-warp Triton) at 8192 columns": [
        "scenario=softmax", "scenario.rows=[64]", "scenario.cols=[8192,4097]", "scenario.tile=4096"],
    "layernorm tile 4096 at 8192 columns": [
        "scenario=layernorm", "scenario.rows=[64]", "scenario.cols=[8192]", "scenario.tile=4096"],
    "attention head_dim 128": [
        "scenario=attention", "scenario.batch=[1]", "scenario.heads=[2]", "scenario.seq_len=[193]",
        "scenario.head_dim=[128]", "scenario.causal=[false,true]"],
}  # fmt: skip
"""Configurations the GPU check's sweep runs that the awkward shapes above do not: each here on small rows, in
every CUDA backend, so a failure is a test that says so rather than a row in the sweep."""


@pytest.mark.parametrize("name", sorted(SWEEP_CONFIGURATIONS))
def test_the_sweeps_configurations_are_right_in_every_cuda_backend(name: str, tmp_path) -> None:
    cfg = make_config(*SWEEP_CONFIGURATIONS[name], "preset=S", "timing=quick", "device=cuda",
                      "dtype=[float32,float16]", "isolate=false")  # fmt: skip
    rows = run(cfg, tmp_path, show_progress=False).table
    cuda = rows[rows["device"] == "cuda"]
    assert {"triton", "cupy", "numba"} <= set(cuda["backend"]), sorted(set(cuda["backend"]))
    bad = cuda[~cuda["status"].isin(["ok", "unsupported"])]
    assert bad.empty, bad[["backend", "variant", "dtype", "params", "status", "reason"]].to_string()


def test_graph_timing_captures_real_launchers(tmp_path) -> None:
    cfg = make_config("scenario=softmax", "preset=S", "timing=quick", "timing.graphs=true", "device=cuda",
                      "dtype=float32", "isolate=false")  # fmt: skip
    rows = run(cfg, tmp_path, show_progress=False).table
    timed = rows[(rows["device"] == "cuda") & rows["time_ms"].notna()]
    captured = timed[timed["time_graph_ms"].notna()]
    assert len(captured) >= len(timed) // 2, timed[["backend", "variant", "extra"]].to_string()
    assert (captured["time_graph_ms"] <= 1.5 * captured["time_ms"]).all()
