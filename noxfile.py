"""nox sessions: `bench` (Hydra overrides after --), `tests`, `lint`, `benchmark` (pytest-benchmark options after --),
`gpu` (the check of a CUDA machine: gpu tests, then a short sweep of every family).

`bench` installs the CUDA extra where a GPU driver answers and the CPU extra elsewhere, so the same command
times every backend on a CUDA machine and, without one, times Numba's CPU target and checks the CUDA kernels in
emulation. `tests` always uses the CPU stack: the tests need no GPU.
"""

from __future__ import annotations

import ctypes
import os

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_venv = "yes"


def _has_gpu() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmark sweep. No arguments: every family at sizes that show the effect, one table and one
    report (`suite.cli.TOUR`); or Hydra overrides: `nox -s bench -- scenario=softmax dtype=float16 device=cpu`."""
    session.install("-e", f".[{'cuda' if _has_gpu() else 'cpu'}]")
    session.run("python", "-m", "suite", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (no GPU needed): `nox -s tests -- -k elementwise` passes arguments to pytest."""
    session.install("-e", ".[cpu,test]")
    session.run("pytest", *session.posargs)


@nox.session
def benchmark(session: nox.Session) -> None:
    """Registry cases as pytest-benchmark benchmarks: `nox -s benchmark -- --fusebench-preset=M
    --fusebench-overrides="scenario=softmax dtype=float32" --benchmark-autosave` passes arguments to pytest."""
    session.install("-e", f".[{'cuda' if _has_gpu() else 'cpu'},test]")
    session.run("pytest", "tests/benchmarks/bench_registry.py", "-p", "no:randomly", *session.posargs)


GPU_SWEEP = ["-m", "experiment=gpu_elementwise,gpu_layernorm,gpu_rmsnorm,gpu_softmax,gpu_attention,gpu_matmul"]
"""What `nox -s gpu` times after its tests: every family, GPU backend and variant at sizes that show the effect."""


@nox.session(venv_params=["--system-site-packages"])
def gpu(session: nox.Session) -> None:
    """The GPU check, on a CUDA machine: the `gpu` tests (every CUDA kernel's numerics on the device, the timer
    against triton.testing.do_bench, the L2 flush, graph capture), then a short sweep of every family (GPU_SWEEP)
    into results/, its report, charts and a one-screen summary. The venv sees the machine's own packages (a GPU
    image's torch and CUDA libraries); FUSEBENCH_WHEELS=<folder> installs the rest from a wheel folder with no
    package index (README: Checking a GPU). Arguments after -- replace the sweep's overrides."""
    if not _has_gpu():
        session.error("no CUDA device answers here (libcuda's cuInit and cuDeviceGetCount): nox -s gpu needs one")
    wheels = os.environ.get("FUSEBENCH_WHEELS")
    offline = ["--no-index", "--find-links", wheels] if wheels else []
    session.install(*offline, "-e", ".[cuda,test]")
    session.run("pytest", "-m", "gpu", "-p", "no:randomly", "-rs", "tests", env={"FUSEBENCH_GPU_TESTS": "1"})
    session.run("python", "-m", "suite", *(session.posargs or GPU_SWEEP))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(name="list")
def list_kernels(session: nox.Session) -> None:
    """Scenarios × backends × variants × devices and how each runs on this machine."""
    session.install("-e", f".[{'cuda' if _has_gpu() else 'cpu'}]")
    session.run("python", "-m", "suite", "list")
