"""On a CUDA device (`nox -s gpu`; skipped elsewhere): the stream-discipline check catches a real kernel launched
off the shared stream, passes the same kernel launched on it, and every registered CUDA implementation that
passes its numerics is on the shared stream (the check runs in the suite's build-and-check)."""

from __future__ import annotations

import json

import pytest

from suite.run import stream_check
from suite.run.runner import run
from tests.conftest import make_config

pytestmark = pytest.mark.gpu


def test_a_cupy_kernel_on_the_legacy_default_stream_is_caught() -> None:
    cupy = pytest.importorskip("cupy")
    from backends.cupy import TARGET
    from suite.gpu import driver

    stream = driver.shared_stream()
    x = cupy.random.rand(1 << 24, dtype=cupy.float32) + 1
    out = cupy.empty_like(x)
    shared = cupy.cuda.ExternalStream(stream)

    def on_the_stream() -> None:
        with shared:
            cupy.multiply(x, 2, out=out)

    def off_the_stream() -> None:
        cupy.multiply(x, 2, out=out)  # CuPy's current stream here: the legacy default, unordered with the shared

    probe = stream_check.device_probe(out, TARGET, stream)
    assert stream_check.check(on_the_stream, probe).ok is True
    found = stream_check.check(off_the_stream, probe)
    assert found.ok is False and "another stream" in found.reason, found


@pytest.mark.parametrize("family", ["elementwise_chain", "softmax", "attention", "matmul"])
def test_every_cuda_implementation_runs_on_the_shared_stream(family: str, tmp_path) -> None:
    cfg = make_config(f"scenario={family}", "preset=S", "timing=quick", "device=cuda", "isolate=false")
    rows = run(cfg, tmp_path, show_progress=False).table
    ok = rows[(rows["device"] == "cuda") & (rows["status"] == "ok")]
    assert len(ok)
    streams = {(r.backend, r.variant): json.loads(r.extra or "{}").get("stream") for r in ok.itertuples()}
    assert set(streams.values()) == {"on the shared stream"}, streams
    errors = rows[rows["reason"].astype(str).str.startswith("stream discipline")]
    assert errors.empty, errors[["backend", "variant", "reason"]].to_string()
