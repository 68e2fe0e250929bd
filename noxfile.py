"""nox sessions: `bench` (Hydra overrides after --), `tests`, `lint`, `benchmark` (pytest-benchmark options after --),
`gpu` (the check of a CUDA machine: `python -m suite gpu-check`, run in the environment at hand), `slurm` (a
single-node SLURM brought up on this machine and the cluster launcher's tests run against it).

`bench` installs the CUDA extra where a GPU driver answers and the CPU extra elsewhere, so the same command
times every backend on a CUDA machine and, without one, times Numba's CPU target and checks the CUDA kernels in
emulation. `tests` always uses the CPU stack: the tests need no GPU.
"""

from __future__ import annotations

import ctypes

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


_SPREAD = ["-n", "auto", "--dist", "worksteal"]
"""One test worker per core, each stealing from the others' queues once its own is done."""


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (no GPU needed): `nox -s tests -- -k elementwise` passes arguments to pytest. The tests
    spread over one worker per core (pytest-xdist, work stealing: a few tests take a minute or more, most a
    second); `nox -s tests -- -n 0` runs them in one process."""
    session.install("-e", ".[cpu,test]")
    spread = [] if any(arg.startswith(("-n", "--numprocesses")) for arg in session.posargs) else _SPREAD
    session.run("pytest", *spread, *session.posargs)


@nox.session
def benchmark(session: nox.Session) -> None:
    """Registry cases as pytest-benchmark benchmarks: `nox -s benchmark -- --fusebench-preset=M
    --fusebench-overrides="scenario=softmax dtype=float32" --benchmark-autosave` passes arguments to pytest; a
    benchmark file named among them (`nox -s benchmark -- tests/benchmarks/bench_lce_parts.py`) runs alone."""
    session.install("-e", f".[{'cuda' if _has_gpu() else 'cpu'},test]")
    named = any(a.endswith(".py") or "::" in a for a in session.posargs)  # a benchmark file of its own
    front_door = [] if named else ["tests/benchmarks/bench_registry.py"]
    session.run("pytest", *front_door, "-p", "no:randomly", *session.posargs)


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """The GPU check, on a CUDA machine: `python -m suite gpu-check` (suite.gpu_check) in the environment nox
    itself runs in, which must already hold the CUDA stack; no virtual environment, nothing installed (a venv
    made from a Python that is itself a venv would not see that venv's torch and CUDA libraries). Where the
    suite's own dependencies are missing, install its wheel folder with --target and put it on PYTHONPATH
    (docs/gpu-check.md). Arguments after -- go to the check: `nox -s gpu -- --quick`."""
    session.run("python", "-m", "suite", "gpu-check", *session.posargs, external=True)


@nox.session
def slurm(session: nox.Session) -> None:
    """The SLURM launcher against a real SLURM: a single-node one brought up on this machine for the session
    (suite.sweep.cluster.local: Debian's slurm-wlm and munge installed where missing, which needs root and apt; a
    generated slurm.conf and munge key in a temporary folder; munged, slurmctld and slurmd stopped by their pids
    at the end, also when a test fails), then the `slurm` tests (tests/test_slurm_cluster.py): a sweep merged,
    resume, a job cancelled mid-sweep, a refused request. Arguments after -- go to pytest."""
    session.install("-e", ".[cpu,slurm,test]")
    session.run("python", "-m", "suite.sweep.cluster.local", "--install", "--",
                "python", "-m", "pytest", "-m", "slurm", "-p", "no:randomly", "-rs", "tests/test_slurm_cluster.py",
                *session.posargs)  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.6")  # pinned: a new release adds rules and would turn CI red on code it passed
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(name="list")
def list_kernels(session: nox.Session) -> None:
    """Scenarios × backends × variants × devices and how each runs on this machine."""
    session.install("-e", f".[{'cuda' if _has_gpu() else 'cpu'}]")
    session.run("python", "-m", "suite", "list")
