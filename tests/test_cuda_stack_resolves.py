"""The `cuda` extra resolves to one CUDA 13 stack, as a CUDA machine's pip would see it: pip's dry-run report of
`.[cuda,test]` against PyPI itself (`--isolated`, so a local index of CPU wheels is not consulted), metadata only.

It asserts what the extra's comment promises: a CUDA 13 build of torch, the Triton that torch pins, CuPy with
cuBLAS and cuRAND from NVIDIA's wheels, numba-cuda with nvJitLink at least as new as its NVVM (so its kernels
are linked to SASS, never left as PTX for an older driver). It reads PyPI for about two minutes, so it runs only
when selected (`pytest -m network tests/test_cuda_stack_resolves.py`) and skips with one line where PyPI does
not answer.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
INDEX = "https://pypi.org/simple"

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def resolved(request: pytest.FixtureRequest) -> dict[str, dict]:
    """name -> its metadata, for every distribution pip would install for `.[cuda,test]` on this platform."""
    if "network" not in (request.config.getoption("-m") or ""):
        pytest.skip("network: resolves the cuda extra against PyPI (about 2 min); select it with -m network")
    if (sys.platform, platform.machine()) != ("linux", "x86_64"):
        pytest.skip("the cuda extra is resolved for linux x86_64, the platform of the CUDA machines")
    try:
        urllib.request.urlopen(f"{INDEX}/torch/", timeout=10).close()
    except OSError as exc:
        pytest.skip(f"PyPI does not answer here ({exc}): the cuda extra's resolution is not checked")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--index-url", INDEX, "--dry-run",
                           "--ignore-installed", "--quiet", "--report", "-", ".[cuda,test]"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    return {item["metadata"]["name"].lower(): item["metadata"] for item in report["install"]}


def _requires(meta: dict) -> list[Requirement]:
    return [Requirement(r) for r in meta.get("requires_dist") or []]


def test_torch_is_a_cuda_13_build_and_brings_the_triton_it_pins(resolved: dict[str, dict]) -> None:
    torch = resolved["torch"]
    linux = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64", "extra": ""}
    needs = {r.name.lower(): r for r in _requires(torch) if r.marker is None or r.marker.evaluate(linux)}
    cuda13 = [n for n in needs if n.endswith("-cu13")] + [
        n for n, r in needs.items() if n == "cuda-toolkit" and any(str(s.version).startswith("13") for s in r.specifier)
    ]
    assert cuda13, f"torch {torch['version']} needs no CUDA 13 package: {sorted(needs)}"
    assert "triton" in needs and Version(resolved["triton"]["version"]) in needs["triton"].specifier


def test_cupy_gets_cublas_and_curand_and_numba_cuda_links_sass(resolved: dict[str, dict]) -> None:
    assert "cupy-cuda13x" in resolved
    assert {"nvidia-cublas", "nvidia-curand", "nvidia-cuda-nvrtc"} <= set(resolved), sorted(resolved)
    assert "numba-cuda" in resolved and "nvidia-nvvm" in resolved
    nvvm, nvjitlink = Version(resolved["nvidia-nvvm"]["version"]), Version(resolved["nvidia-nvjitlink"]["version"])
    assert nvjitlink.release[:2] >= nvvm.release[:2], (nvjitlink, nvvm)  # it links all NVVM's PTX to SASS
