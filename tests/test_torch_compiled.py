"""torch's eager and compiled rows: what Inductor made is read right, the hand-fused rows are paired with the
compiler, and compile cost stays apart from run cost (a rerun into the same run directory is warm).

Numerics of every torch variant on awkward shapes are in tests/test_kernels.py (parametrized from the registry)
and on preset S in tests/test_golden_rows.py; a bad `backend_options.torch.mode` is in tests/test_cli.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from backends.torch import inductor_code
from suite.kit.tidy import VERDICTS
from suite.run.runner import run
from tests.conftest import make_config

CPU_MODULE = '''
cpp_fused_copy__gelu_mul_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r"""
extern "C" void kernel(const float* in_ptr0, float* out_ptr1) {}
""")
cpp_fused__softmax_1 = async_compile.cpp_pybinding(['const float*', 'float*'], r"""...""")

async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg0_1, (2, 193, 64), (12352, 64, 1), 'input')
        buf0 = empty_strided_cpu((2, 193, 193), (37249, 193, 1), torch.float32)
        extern_kernels.bmm(arg0_1, reinterpret_tensor(arg1_1, (2, 64, 193), (12352, 1, 64), 0), out=buf0)
        buf1 = empty_strided_cpu((2, 193, 1), (193, 1, 386), torch.float32)
        cpp_fused__softmax_1(buf0, buf1)
        buf3 = buf0; del buf0  # reuse
        cpp_fused_copy__gelu_mul_0(buf3, arg2_1)
        return ()

runner = Runner(partitions=[])
call = runner.call


def get_args():
    buf9 = empty_strided_cpu((999, 999), (999, 1), torch.float32)
'''

CUDA_MODULE = '''
triton_poi_fused_add_gelu_0 = async_compile.triton('triton_poi_fused_add_gelu_0', """...""", device_str='cuda')

def call(args):
    arg0_1, arg1_1, arg2_1, arg3_1 = args
    with torch.cuda._DeviceGuard(0):
        buf0 = empty_strided_cuda((129, 77), (77, 1), torch.float32)
        extern_kernels.mm(arg0_1, arg1_1, out=buf0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_add_gelu_0.run(buf0, arg2_1, arg3_1, 9933, grid=grid(9933), stream=stream0)
    return ()
'''


def test_generated_cpu_module_is_read_from_its_call():
    made = inductor_code.read([CPU_MODULE])
    assert made.kernels == ("cpp_fused__softmax_1", "cpp_fused_copy__gelu_mul_0")
    assert made.extern == ("extern_kernels.bmm",)
    assert made.buffers == ((2, 193, 193), (2, 193, 1))  # get_args' buffer is not the call's
    notes = made.notes(full_elements=2 * 193 * 64)
    assert notes["kernels"] == 3 and notes["full_size_intermediates"] == 1
    assert notes["largest_intermediate"] == [2, 193, 193]


def test_generated_cuda_module_counts_triton_launches_and_library_calls():
    made = inductor_code.read([CUDA_MODULE])
    assert made.kernels == ("triton_poi_fused_add_gelu_0",) and made.extern == ("extern_kernels.mm",)
    assert made.notes(full_elements=129 * 77)["full_size_intermediates"] == 1
    assert made.notes(full_elements=129 * 78)["full_size_intermediates"] == 0


def test_full_size_is_the_case_largest_tensor_not_its_output():
    """Cross-entropy's output is a per-token loss: a token vector kept beside the tokens×vocab logits is small,
    and only a buffer as large as the logits (the case's largest tensor) is a full-size intermediate."""
    import contextlib

    import torch

    from backends.torch.compiler import Compiled

    tokens, vocab = 37, 1009
    logits, target, loss = torch.zeros(tokens, vocab), torch.zeros(tokens, dtype=torch.long), torch.zeros(tokens)
    launch = Compiled(lambda *a: None, (logits, target, loss), loss, {}, contextlib.nullcontext)
    assert launch.full_elements == tokens * vocab
    made = inductor_code.Generated(buffers=((tokens, 1), (tokens, 1), (tokens, vocab)))
    assert made.notes(launch.full_elements)["full_size_intermediates"] == 1
    assert made.notes(tokens)["full_size_intermediates"] == 3  # what the output's size alone would have called full


def test_graph_breaks_add_up_and_no_module_is_nothing():
    assert inductor_code.read([CUDA_MODULE, CUDA_MODULE]).notes(1)["kernels"] == 4
    assert inductor_code.read([]).notes(1) == {
        "kernels": 0,
        "generated": [],
        "extern": [],
        "full_size_intermediates": 0,
        "largest_intermediate": [],
        "buffer_elements": 0,
    }


CHAIN = ["scenario.n=[4099]", "scenario.ops=[[scale,shift,scale,shift]]", "dtype=[float32]", "device=cpu",
         "backends=[numba,torch]", "timing=quick"]  # fmt: skip


def test_hand_fused_rows_are_paired_with_the_compiler(tmp_path):
    frame = run(make_config(*CHAIN, "isolate=false"), tmp_path, show_progress=False).table
    rows = {(r.backend, r.variant): r for r in frame.itertuples()}
    assert set(rows) == {("numba", "fused"), ("numba", "unfused"), ("torch", "eager"), ("torch", "compiled")}
    assert all(r.status == "ok" and r.time_ms > 0 for r in rows.values())
    compiled = json.loads(rows["torch", "compiled"].extra)["compiler"]
    assert compiled["kernels"] == 1 and compiled["full_size_intermediates"] == 0 and compiled["graphs"] == 1
    assert compiled["mode"] == "default" and compiled["dynamic"] is False
    assert rows["torch", "eager"].launches == 4 and rows["torch", "compiled"].launches == 1
    assert rows["torch", "compiled"].baseline == "eager" and rows["torch", "compiled"].verdict in VERDICTS
    fused = rows["numba", "fused"]
    assert fused.rival == "torch/compiled" and fused.rival_verdict in VERDICTS
    assert fused.rival_lo <= fused.rival_speedup <= fused.rival_hi
    assert pd.isna(rows["numba", "unfused"].rival)  # only the scenario's candidates are paired with a rival


@pytest.mark.parametrize("mode", ["reduce-overhead"])
def test_mode_reaches_torch_compile(tmp_path, mode):
    overrides = [*CHAIN, "backends=[torch]", "variants=[compiled]", f"+backend_options.torch.mode={mode}"]
    frame = run(make_config(*overrides, "isolate=false"), tmp_path, show_progress=False).table
    assert frame["status"].tolist() == ["ok"]
    assert json.loads(frame["extra"].iloc[0])["compiler"]["mode"] == mode


def test_rerun_into_the_same_run_directory_is_warm(tmp_path, monkeypatch):
    """Each run compiles in a fresh worker process: only Inductor's on-disk cache under the run directory can
    make the second one warm, and its first call then costs far less."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    overrides = [*CHAIN, "backends=[torch]", "variants=[compiled]", "isolate=true"]
    first = run(make_config(*overrides), tmp_path, show_progress=False).table
    second = run(make_config(*overrides), tmp_path, show_progress=False).table
    cold, warm = (json.loads(f["extra"].iloc[0])["compiler"] for f in (first, second))
    assert cold["cache"] == "cold" and warm["cache"] == "warm"
    assert cold["cache_dir"] == warm["cache_dir"] == str(tmp_path.resolve() / "cache" / "inductor")
    assert any((tmp_path / "cache" / "inductor").iterdir())
    assert second["compile_ms"].iloc[0] < first["compile_ms"].iloc[0]
    assert warm["kernels"] == cold["kernels"] == 1


def test_bad_mode_exits_two_naming_the_modes():
    proc = subprocess.run([sys.executable, "-m", "suite", "backend_options.torch.mode=fastest"], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "backend_options.torch.mode=fastest must be one of default, reduce-overhead" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
