"""What the check finds before any work: the GPU, the driver, the CUDA libraries, and which backends will run.

Probed in a child process (`python -m suite.gpu_check.stack` prints it as JSON), so that the check's own process
never creates a CUDA context beside the worker's and a library that crashes on import costs a line, not the
check. Each CUDA backend's target says how it runs here (`Target.probe`) and a backend package that failed to
import says why (`REGISTRY.load_errors`): those become `skipped` rows in the sweep, never an abort.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

PACKAGES = ("torch", "triton", "cupy-cuda13x", "numba-cuda", "numba", "numpy", "hydra-core", "nvidia-ml-py")
"""Distributions whose versions the stack reports."""


@dataclass
class Stack:
    gpu: dict[str, Any] = field(default_factory=dict)
    """name, sms, l2_bytes, compute_capability, sm/mem clocks, driver_version, cuda_version; `error` if none."""
    packages: dict[str, str] = field(default_factory=dict)
    """distribution -> version, "" where not installed; torch's CUDA build as torch_cuda."""
    backends: dict[str, list[str]] = field(default_factory=dict)
    """backend -> [mode, reason] of its CUDA target, or ["unavailable", why its package did not import]."""
    notes: list[str] = field(default_factory=list)
    """One line each: toolkits newer than the driver, a library a backend needs that does not load."""

    @property
    def native(self) -> list[str]:
        return sorted(b for b, (mode, _why) in self.backends.items() if mode == "native")

    @property
    def skipped(self) -> dict[str, str]:
        """Backends whose CUDA rows will be `skipped`, with the reason."""
        return {b: why for b, (mode, why) in sorted(self.backends.items()) if mode != "native"}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = ""
    with contextlib.suppress(Exception):
        import torch

        found["torch_cuda"] = torch.version.cuda or "none (a CPU build)"
    return found


def _gpu() -> dict[str, Any]:
    from suite.core.targets import cuda_device_count

    if cuda_device_count() == 0:
        return {"error": "no CUDA device answers (libcuda's cuInit and cuDeviceGetCount)"}
    from suite.gpu import driver, nvml

    found: dict[str, Any] = {}
    try:
        found.update(name=driver.device_name(), compute_capability=driver.compute_capability(),
                     sms=driver._attribute(driver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"),
                     l2_bytes=driver.l2_bytes(), cuda_version=driver.cuda_version())  # fmt: skip
    except Exception as exc:
        found["error"] = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(Exception):
        snap = nvml.snapshot()
        keys = ("driver_version", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "mem_clock_max_mhz")
        found.update({k: snap.get(k) for k in keys if snap.get(k) is not None})
    return found


def _backends() -> dict[str, list[str]]:
    from suite.core.registry import REGISTRY
    from suite.core.targets import TARGETS
    from suite.run import validate

    validate.discover()
    found = {}
    for (backend, device), target in sorted(TARGETS.items()):
        if device != "cuda":
            continue
        try:
            probe = target.probe()
            found[backend] = [probe.mode, probe.reason]
        except Exception as exc:  # a probe must not take the check down either
            found[backend] = ["unavailable", f"probe failed: {type(exc).__name__}: {exc}"]
    for module, why in sorted(REGISTRY.load_errors.items()):
        found.setdefault(module.split(".")[0], ["unavailable", f"{module} did not import: {why}"])
    return found


def _toolkit_notes(gpu: dict[str, Any], packages: dict[str, str]) -> list[str]:
    """One line per toolkit newer than the driver's CUDA: PTX from it cannot be JIT-compiled by the driver."""
    driver_cuda = gpu.get("cuda_version")
    if not driver_cuda:
        return []
    toolkits = {}
    with contextlib.suppress(Exception):
        from cupy.cuda import nvrtc

        major, minor = nvrtc.getVersion()
        toolkits["CuPy's NVRTC"] = f"{major}.{minor}"
    with contextlib.suppress(Exception):
        from numba.cuda.cudadrv import nvvm

        toolkits["numba-cuda's NVVM"] = ".".join(map(str, nvvm.NVVM().get_version()))
    if packages.get("torch_cuda", "").split(" ")[0][:1].isdigit():
        toolkits["torch's CUDA"] = packages["torch_cuda"]
    return [newer_than_driver(name, version, driver_cuda) for name, version in toolkits.items()
            if _key(version) > _key(driver_cuda)]  # fmt: skip


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


def newer_than_driver(toolkit: str, version: str, driver_cuda: str) -> str:
    return (f"{toolkit} {version} is newer than the driver's CUDA {driver_cuda}: its PTX cannot be JIT-compiled "
            "here, so kernels must load as SASS built for this GPU (CuPy and Triton compile to a cubin; numba-cuda "
            "links through nvJitLink where installed); a kernel left as PTX fails with that reason")  # fmt: skip


def _library_notes(backends: dict[str, list[str]]) -> list[str]:
    """CuPy's cuBLAS (the library matmul rows): present only where a CUDA wheel or toolkit brings it."""
    if backends.get("cupy", [""])[0] != "native":
        return []
    try:
        cublas = importlib.import_module("cupy_backends.cuda.libs.cublas")
        cublas.create()
    except Exception as exc:
        return [f"CuPy cannot load cuBLAS ({type(exc).__name__}: {exc}): its library matmul rows will be errors "
                "that say so (pip install nvidia-cublas, or torch's CUDA wheel, brings it)"]  # fmt: skip
    return []


def probe() -> Stack:
    """The stack of this process's environment (imports every backend; may create a CUDA context)."""
    packages = _versions()
    gpu = _gpu()
    backends = _backends()
    notes = _toolkit_notes(gpu, packages) + _library_notes(backends)
    return Stack(gpu, packages, backends, notes)


def probe_child(timeout_s: float = 300.0) -> Stack:
    """`probe()` in a child process; a child that fails or hangs gives a Stack whose gpu says why."""
    try:
        done = subprocess.run([sys.executable, "-m", "suite.gpu_check.stack"], capture_output=True, text=True,
                              timeout=timeout_s, check=False)  # fmt: skip
        if done.returncode == 0:
            return Stack(**json.loads(done.stdout.strip().splitlines()[-1]))
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    return Stack(gpu={"error": f"probing the stack failed: {why}"})


def lines(stack: Stack) -> list[str]:
    """The stack as the check prints it first."""
    g, p = stack.gpu, stack.packages
    if "name" in g:
        gpu = (f"GPU       {g['name']} (sm_{str(g.get('compute_capability', '?')).replace('.', '')}), "
               f"{g.get('sms', '?')} SMs, L2 {g.get('l2_bytes', 0) / 2**20:.0f} MiB, SM clock "
               f"{g.get('sm_clock_mhz', '?')}/{g.get('sm_clock_max_mhz', '?')} MHz, memory clock "
               f"{g.get('mem_clock_mhz', '?')}/{g.get('mem_clock_max_mhz', '?')} MHz")  # fmt: skip
        driver = f"driver    {g.get('driver_version', '?')}, CUDA {g.get('cuda_version', '?')}"
    else:
        gpu, driver = f"GPU       none: {g.get('error', 'not probed')}", "driver    -"
    have = lambda name: p.get(name) or "not installed"
    out = [gpu, driver,
           f"torch     {have('torch')} (CUDA {p.get('torch_cuda', '-')}), Triton {have('triton')}",
           f"CuPy      {have('cupy-cuda13x')}, numba-cuda {have('numba-cuda')} (Numba {have('numba')}), "
           f"NumPy {have('numpy')}, Hydra {have('hydra-core')}",
           f"backends  run natively: {', '.join(stack.native) or 'none'}"]  # fmt: skip
    out += [f"skipped   {b}: {why}" for b, why in stack.skipped.items()]
    out += [f"note      {n}" for n in stack.notes]
    return out


def main() -> None:
    from suite.core.targets import configure_emulation

    configure_emulation(False)  # the stack as a GPU run sees it: no interpreter, no simulator
    print(json.dumps(asdict(probe())))


if __name__ == "__main__":
    main()
