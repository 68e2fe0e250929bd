"""Helpers shared by the tests that compile CUDA kernels for sm_90 without a GPU and read their resources.

Those tests skip, with the reason, where a backend's package is not installed (`missing`) or where NVRTC cannot
compile for sm_90 (`nvrtc_reason`). Triton's compiler and Numba's PTX compiler refuse to run under the Triton
interpreter and the Numba CUDA simulator that this test session switches on (tests/conftest.py), so their
kernels are compiled in a subprocess whose environment lacks both switches (`run_without_emulation`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EMULATION_SWITCHES = ("TRITON_INTERPRET", "NUMBA_ENABLE_CUDASIM")


def missing(*modules: str) -> str:
    """'not installed: a, b' for the modules that cannot be found; '' when all can."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"not installed: {', '.join(absent)}" if absent else ""


@functools.cache
def nvrtc_reason() -> str:
    """Why CuPy's NVRTC cannot compile a trivial kernel for sm_90, "" when it can (compiled once a session)."""
    if reason := missing("cupy"):
        return reason
    from backends.cupy.build import compile_sm90

    try:
        compile_sm90('extern "C" __global__ void k(float* y) { *y = 1.0f; }', "k")
    except Exception as exc:
        return f"NVRTC cannot compile for sm_90: {exc}"
    return ""


@functools.cache
def host_shim_reason() -> str:
    """Why CUDA sources cannot be run on the host through the C++20 shim of the *_host tests ("" when they can):
    one std::thread per CUDA thread, std::barrier for __syncthreads, _Float16 for halves."""
    if not shutil.which("g++"):
        return "needs g++ (C++20: std::barrier, _Float16)"
    probe = "#include <barrier>\nint main() { std::barrier<> b(1); _Float16 h = 1; return (int)h - 1; }"
    done = subprocess.run(["g++", "-std=c++20", "-x", "c++", "-", "-o", "/dev/null", "-pthread"], input=probe,
                          capture_output=True, text=True)  # fmt: skip
    return "" if done.returncode == 0 else f"g++ cannot build the shim: {done.stderr[-300:]}"


def nvrtc_resources(kernel: Any) -> Any:
    """Registers, spills, stack and shared memory of a compiled-only CuPy kernel (`backends.cupy.build`), read
    from its ptxas log as the resource report reads it."""
    from suite.gpu.ptxas import parse_ptxas

    return parse_ptxas(kernel.log)[kernel.name]


def run_without_emulation(script: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `python -c script *args` in the repository root without the interpreter and simulator switches."""
    env = {k: v for k, v in os.environ.items() if k not in EMULATION_SWITCHES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default; set so that it does not warn
    command = [sys.executable, "-c", script, *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def json_lines(stdout: str) -> list[dict]:
    """The JSON objects a compile script printed, one a line."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
