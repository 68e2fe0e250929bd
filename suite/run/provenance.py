"""Where a row came from: library versions, device name, git revision, and a command that reproduces it; and
where a run came from: `environment()`, written to the run's environment.json, so two runs can be told apart."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, distributions, version
from pathlib import Path
from typing import Any

from suite.core.backend import BACKENDS
from suite.gpu import nvml

PACKAGES = ("numpy", "hydra-core", "pandas")
"""The suite's own; each registered backend adds the distributions it is made of (`Backend.packages`)."""
ROOT = Path(__file__).resolve().parent.parent


def versions() -> str:
    found = {"python": platform.python_version()}
    for name in dict.fromkeys([*PACKAGES, *(p for b in BACKENDS.values() for p in b.packages)]):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return json.dumps(found, sort_keys=True)


RESULTS_DIR = "results"
"""Where runs write and committed runs live: what changes there is data, not the code a run measured."""


def git_rev(root: Path | None = None) -> str:
    """The revision the code came from, `-dirty` where a tracked file outside `results/` differs from it: a run
    that rewrites a committed run's directory (regenerating it in place) still measured the revision's code."""
    root = ROOT if root is None else root
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ":(top)",
                f":(top,exclude){RESULTS_DIR}",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{rev}-dirty" if rev and dirty else rev


def _cpuinfo(*fields: str) -> str | None:
    """The value of the first /proc/cpuinfo line starting with one of `fields` (None where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(fields):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_name() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_microarchitecture() -> dict[str, str]:
    """The core the CPU is, as LLVM names it (znver3, znver4, sapphirerapids: "AMD EPYC" alone does not tell a
    Zen 3 from a Zen 5), and the one Numba builds its kernels for: the same unless NUMBA_CPU_NAME says another
    (znver3 on an AVX-512 host builds AVX2 code). {} where llvmlite is not installed."""
    try:
        from llvmlite import binding
    except ImportError:
        return {}
    host = binding.get_host_cpu_name()
    target = os.environ.get("NUMBA_CPU_NAME", "host")
    return {"microarchitecture": host, "numba_target": host if target in ("", "host") else target}


FULL_WIDTH = ",-prefer-256-bit"
"""How `backends.numba.full_width` ends the feature string it hands Numba (in NUMBA_CPU_FEATURES)."""


def numba_vector_width() -> dict[str, str]:
    """{"numba_vector_width": "full" | "llvm"}: whether LLVM's preference for 256-bit vectors on an AVX-512 host
    was turned off for the Numba CPU kernels (`backends.numba.full_width`, which says so in NUMBA_CPU_FEATURES);
    {} where the user named another target or features."""
    features = os.environ.get("NUMBA_CPU_FEATURES")
    if os.environ.get("NUMBA_CPU_NAME") or (features and not features.endswith(FULL_WIDTH)):
        return {}
    return {"numba_vector_width": "full" if features else "llvm"}


CACHE_INDEX = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_caches(where: Path = CACHE_INDEX) -> dict[str, int]:
    """The sizes in bytes of the first CPU's caches as sysfs lists them ({"L1d": 49152, "L1i": 32768, "L2": …,
    "L3": …}): the last level is the boundary past which the ledger's bytes are memory traffic, so the report says
    which cases' intermediates fit inside it. {} where sysfs does not say (not Linux, a container hiding it)."""
    found = {}
    for index in sorted(where.glob("index*")):
        try:
            level, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        if not size.rstrip("KMG").isdigit():
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        found[f"L{level}{suffix}"] = int(size.rstrip("KMG")) * scale
    return found


def cpu_flags() -> list[str]:
    """The instruction-set flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    return sorted((_cpuinfo("flags", "Features") or "").split())


def threads() -> dict[str, int | None]:
    """CPUs this process may run on, and the thread pools' sizes where a library says."""
    found: dict[str, int | None] = {"cpu_count": os.cpu_count()}
    if hasattr(os, "sched_getaffinity"):
        found["usable_cpus"] = len(os.sched_getaffinity(0))
    if "numba" in sys.modules:
        found["numba_threads"] = sys.modules["numba"].config.NUMBA_NUM_THREADS
    if "torch" in sys.modules:
        found["torch_threads"] = sys.modules["torch"].get_num_threads()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        if name in os.environ:
            found[name] = int(os.environ[name]) if os.environ[name].isdigit() else None
    return found


def gpu() -> dict[str, str]:
    """Device 0's name, compute capability, the driver's version and the CUDA version it supports."""
    from suite.gpu import driver

    found = {
        "name": driver.device_name(),
        "compute_capability": driver.compute_capability(),
        "cuda_driver_api": driver.cuda_version(),
    }
    try:  # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ..."
        words = Path("/proc/driver/nvidia/version").read_text().split()
        found["driver"] = next(w for w in words if w.count(".") >= 1 and w.replace(".", "").isdigit())
    except (OSError, StopIteration):
        pass
    return found


def environment(has_gpu: bool) -> dict[str, Any]:
    """Everything a later comparison may need to explain a difference: every installed distribution and its
    version, Python, the OS, the CPU's model, caches, flags and threads, and the GPU's name and driver where there is one,
    with what NVML says of it as the run starts (`nvml.start`: clocks, power, temperature, throttling; see
    `suite.gpu.nvml`; absent without NVML), read once as the worker starts; `ended` adds the reading at the end."""
    dists = {d.metadata["Name"]: d.version for d in distributions() if d.metadata["Name"]}
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu": {
            "model": cpu_name(),
            **cpu_microarchitecture(),
            **numba_vector_width(),
            "caches": cpu_caches(),
            "flags": cpu_flags(),
            **threads(),
        },
        "git_rev": git_rev(),
        "distributions": dict(sorted(dists.items(), key=lambda kv: kv[0].lower())),
    }
    if has_gpu:
        try:
            env["gpu"] = gpu()
        except Exception as exc:  # the run goes on; the file says what could not be read
            env["gpu"] = {"error": str(exc).splitlines()[0]}
        if start := nvml.snapshot():
            env["nvml"] = {"start": start}
    return env


def ended(environment: dict[str, Any]) -> dict[str, Any]:
    """`environment` with NVML's reading of the same GPU as the run ends (`nvml.end`), so a run that heated the
    card or lost clock on the way says so beside how it started; `environment` itself, unchanged, where there
    was no start reading (no GPU, no NVML), it named no UUID, or the end cannot be read. Found by UUID: the
    process that calls this need not be the worker that read the start, and opens no CUDA context for it."""
    start = environment.get("nvml", {}).get("start") or {}
    end = nvml.snapshot(uuid=start["uuid"]) if start.get("uuid") else {}
    return {**environment, "nvml": {**environment["nvml"], "end": end}} if end else environment


def _override(key: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        value = "[" + ",".join(_override("", v) if isinstance(v, list | tuple) else str(v) for v in value) + "]"
    return f"{key}={value}" if key else str(value)


def command(
    scenario: str,
    params: dict[str, Any],
    dtype: str,
    backend: str,
    device: str,
    variant: str,
    options: Mapping[str, Any] | None = None,
    plugins: Sequence[str] = (),
    phase: str = "forward",
) -> str:
    """A command line that reruns exactly this (case, implementation), with the backend's `options` the run set
    (`backend_options.<backend>.<option>=<value>`, each as the command line writes it) and the `plugins` it
    imported (a family or backend they register is found again)."""
    parts = ["python", "-m", "suite", *([f"plugins=[{','.join(plugins)}]"] if plugins else []), f"scenario={scenario}"]
    parts += [_override(f"scenario.{k}", v) for k, v in params.items()]
    parts += [f"dtype={dtype}", f"backends=[{backend}]", f"device={device}", f"variants=[{variant}]"]
    parts += [f"phase={phase}"] if phase != "forward" else []
    parts += [
        _override(f"backend_options.{backend}.{k}", _value(v))
        for k, v in sorted((options or {}).items())
        if v is not None
    ]
    return " ".join(shlex.quote(p) for p in parts)


def _value(value: Any) -> Any:
    """`value` as a Hydra override writes it: booleans in lower case, the rest as Python prints them."""
    return str(value).lower() if isinstance(value, bool) else value
