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
import os
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
    """One line each: a library a backend needs that does not load."""
    compile: str = ""
    """How each backend's kernels reach the device (SASS or PTX the driver compiles), against the driver's CUDA."""
    warnings: dict[str, str] = field(default_factory=dict)
    """backend -> why its kernels will not load here though it runs natively (PTX newer than the driver)."""

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
        torch = importlib.import_module("torch")  # by name: a version probe, not the machinery naming a backend
        found["torch_cuda"] = torch.version.cuda or "none (a CPU build)"
    return found


def _gpu() -> dict[str, Any]:
    from suite.core.targets import cuda_device_count

    if cuda_device_count() == 0:
        return {"error": "no CUDA device answers (libcuda's cuInit and cuDeviceGetCount)"}
    from suite.gpu import driver, nvml

    found: dict[str, Any] = {}
    try:
        found.update(
            name=driver.device_name(),
            compute_capability=driver.compute_capability(),
            sms=driver._attribute(driver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"),
            l2_bytes=driver.l2_bytes(),
            cuda_version=driver.cuda_version(),
        )
    except Exception as exc:
        found["error"] = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(Exception):
        snap = nvml.snapshot()
        keys = ("driver_version", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "mem_clock_max_mhz",
                "memory_bus_bits")  # fmt: skip
        found.update({k: snap.get(k) for k in keys if snap.get(k) is not None})
    return found


def peak_gbps(gpu: dict[str, Any]) -> float | None:
    """The GPU's specified peak memory bandwidth from its properties: two transfers a memory clock (HBM and GDDR
    alike, as NVML reports the clock) over the bus width; None where either is unknown. An H100 SXM's 2,619 MHz
    over 5,120 bits gives its 3.35 TB/s."""
    clock, bits = gpu.get("mem_clock_max_mhz"), gpu.get("memory_bus_bits")
    return 2 * clock * 1e6 * bits / 8 / 1e9 if clock and bits else None


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


TOOLKIT = {"nvrtc": "nvidia-cuda-nvrtc", "nvvm": "nvidia-nvvm", "nvjitlink": "nvidia-nvjitlink"}
"""The CUDA compilers the backends load, by the wheels that bring them (a system toolkit is asked directly)."""


def _toolkit() -> dict[str, str]:
    """Version (major.minor) of NVRTC, NVVM and nvJitLink as installed; "" where absent. `nvjitlink` only where
    numba-cuda would link through it (its own test: the library loads and is 12.3 or newer)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name, dist in TOOLKIT.items():
        try:
            found[name] = ".".join(version(dist).split(".")[:2])
        except PackageNotFoundError:
            found[name] = ""
    with contextlib.suppress(Exception):
        nvrtc = importlib.import_module("cupy.cuda.nvrtc")  # by name, as above
        found["nvrtc"] = "{}.{}".format(*nvrtc.getVersion())  # what CuPy really loads, wheel or toolkit
    try:
        numba_driver = importlib.import_module("numba.cuda.cudadrv.driver")
        if not numba_driver._have_nvjitlink():
            found["nvjitlink"] = ""
    except Exception:
        found["nvjitlink"] = ""
    found["cupy_ptx"] = "1" if os.environ.get("CUPY_COMPILE_WITH_PTX", "0") not in ("", "0") else ""
    return found


def compile_paths(driver_cuda: str, toolkit: dict[str, str]) -> tuple[str, dict[str, str]]:
    """How each CUDA backend's kernels reach the device, in one line, and a warning per backend whose kernels
    would need the driver to JIT-compile PTX newer than the driver (which it refuses: they cannot load).

    SASS (a cubin for this GPU) loads on any driver of the same CUDA major version; PTX is compiled by the
    driver, which reads only the PTX of its own CUDA version and older."""
    risky: dict[str, str] = {}
    paths = []
    nvrtc, nvvm, nvjitlink = toolkit.get("nvrtc", ""), toolkit.get("nvvm", ""), toolkit.get("nvjitlink", "")
    if toolkit.get("cupy_ptx"):
        paths.append(f"CuPy PTX from NVRTC {nvrtc or '?'} (CUPY_COMPILE_WITH_PTX)")
        if nvrtc and _key(nvrtc) > _key(driver_cuda):
            risky["cupy"] = _ptx_newer("CuPy's", "NVRTC", nvrtc, driver_cuda, "unset CUPY_COMPILE_WITH_PTX")
    else:
        paths.append(f"CuPy SASS from NVRTC {nvrtc or '?'}")
        if nvrtc and _key(nvrtc)[:1] > _key(driver_cuda)[:1]:
            risky["cupy"] = _major_newer("NVRTC", nvrtc, driver_cuda)
    paths.append("Triton SASS from its own ptxas")
    if nvjitlink:
        paths.append(f"numba-cuda SASS linked by nvJitLink {nvjitlink} (NVVM {nvvm or '?'})")
        if _key(nvjitlink)[:1] > _key(driver_cuda)[:1]:
            risky["numba"] = _major_newer("nvJitLink", nvjitlink, driver_cuda)
    else:
        paths.append(f"numba-cuda PTX from NVVM {nvvm or '?'}, JIT-compiled by the driver (no nvJitLink)")
        if nvvm and _key(nvvm) > _key(driver_cuda):
            risky["numba"] = _ptx_newer(
                "numba-cuda's",
                "NVVM",
                nvvm,
                driver_cuda,
                f"pip install 'nvidia-nvjitlink>={nvvm}' to link SASS instead",
            )
    return f"{', '.join(paths)}; driver CUDA {driver_cuda or '?'}", risky


def _ptx_newer(owner: str, compiler: str, version: str, driver_cuda: str, fix: str) -> str:
    return (
        f"{owner} PTX from {compiler} {version} is newer than the driver's CUDA {driver_cuda}, which cannot "
        f"JIT-compile it: its kernels will not load ({fix})"
    )


def _major_newer(compiler: str, version: str, driver_cuda: str) -> str:
    return f"{compiler} {version} builds for a newer CUDA major version than the driver's {driver_cuda}: kernels will not load"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


def _library_notes(backends: dict[str, list[str]]) -> list[str]:
    """CuPy's cuBLAS (the library matmul rows): present only where a CUDA wheel or toolkit brings it."""
    if backends.get("cupy", [""])[0] != "native":
        return []
    try:
        cublas = importlib.import_module("cupy_backends.cuda.libs.cublas")
        cublas.create()
    except Exception as exc:
        return [
            f"CuPy cannot load cuBLAS ({type(exc).__name__}: {exc}): its library matmul rows will be errors "
            "that say so (pip install nvidia-cublas, or torch's CUDA wheel, brings it)"
        ]
    return []


def probe() -> Stack:
    """The stack of this process's environment (imports every backend; may create a CUDA context)."""
    packages = _versions()
    gpu = _gpu()
    backends = _backends()
    toolkit = _toolkit()
    packages.update({f"toolkit_{k}": v for k, v in toolkit.items()})
    compile_line, warnings = compile_paths(str(gpu.get("cuda_version", "")), toolkit)
    if not gpu.get("cuda_version"):
        warnings = {}  # no driver to compare with: the line says what would be compiled, nothing is at risk here
    return Stack(gpu, packages, backends, _library_notes(backends), compile_line, warnings)


def probe_child(timeout_s: float = 300.0) -> Stack:
    """`probe()` in a child process; a child that fails or hangs gives a Stack whose gpu says why."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "suite.gpu_check.stack"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
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
        gpu = (
            f"GPU       {g['name']} (sm_{str(g.get('compute_capability', '?')).replace('.', '')}), "
            f"{g.get('sms', '?')} SMs, L2 {g.get('l2_bytes', 0) / 2**20:.0f} MiB, SM clock "
            f"{g.get('sm_clock_mhz', '?')}/{g.get('sm_clock_max_mhz', '?')} MHz, memory clock "
            f"{g.get('mem_clock_mhz', '?')}/{g.get('mem_clock_max_mhz', '?')} MHz"
        )
        driver = f"driver    {g.get('driver_version', '?')}, CUDA {g.get('cuda_version', '?')}"
    else:
        gpu, driver = f"GPU       none: {g.get('error', 'not probed')}", "driver    -"
    have = lambda name: p.get(name) or "not installed"
    out = [
        gpu,
        driver,
        f"torch     {have('torch')} (CUDA {p.get('torch_cuda', '-')}), Triton {have('triton')}",
        f"CuPy      {have('cupy-cuda13x')}, numba-cuda {have('numba-cuda')} (Numba {have('numba')}), "
        f"NumPy {have('numpy')}, Hydra {have('hydra-core')}",
        f"backends  run natively: {', '.join(stack.native) or 'none'}",
    ]
    out += [f"compile   {stack.compile}"] if stack.compile else []
    out += [f"skipped   {b}: {why}" for b, why in stack.skipped.items()]
    out += [f"warning   {b}: {why}" for b, why in sorted(stack.warnings.items())]
    out += [f"note      {n}" for n in stack.notes]
    return out


def main() -> None:
    from suite.core.targets import configure_emulation

    configure_emulation(False)  # the stack as a GPU run sees it: no interpreter, no simulator
    print(json.dumps(asdict(probe())))


if __name__ == "__main__":
    main()
