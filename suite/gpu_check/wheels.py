"""The wheel folder of what the suite adds on top of a CUDA stack, for a machine with no package index.

A GPU machine's environment already holds the heavy part (torch, Triton, CuPy, numba-cuda, NumPy, pandas,
seaborn, pytest: CUDA_STACK). What the suite adds is a few small distributions (ADDED); built here, where an
index answers, for the target's Python and platform, carried over, and installed beside the environment
without touching it:

    python -m suite.gpu_check.wheels wheels/ --python-version 3.12 --platform manylinux_2_28_x86_64
    pip install --no-index --no-deps --target /opt/fusebench-deps wheels/*.whl        # there
    PYTHONPATH=/opt/fusebench-deps python -m suite gpu-check

Versions are pinned to those this environment runs the tests with. antlr4-python3-runtime 4.9.3 (omegaconf's
pin) is published as source only, so it is built into a wheel here (pure Python: it installs anywhere).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ADDED = (
    "hydra-core",
    "omegaconf",
    "antlr4-python3-runtime",
    "PyYAML",
    "rich",
    "markdown-it-py",
    "mdurl",
    "pygments",
    "packaging",
    "pyarrow",
    "ml_dtypes",
    "nvidia-ml-py",
)
"""Distributions the suite imports (or its dependencies import) that a CUDA stack does not bring."""
BUILT_FROM_SOURCE = ("antlr4-python3-runtime",)
CUDA_STACK = (
    "torch",
    "triton",
    "cupy-cuda13x",
    "numba",
    "numba-cuda",
    "llvmlite",
    "numpy",
    "pandas",
    "python-dateutil",
    "pytz",
    "tzdata",
    "six",
    "seaborn",
    "matplotlib",
    "contourpy",
    "cycler",
    "fonttools",
    "kiwisolver",
    "pillow",
    "pyparsing",
    "pytest",
    "iniconfig",
    "pluggy",
    "pytest-benchmark",
    "py-cpuinfo",
    "filelock",
    "fsspec",
    "jinja2",
    "markupsafe",
    "networkx",
    "sympy",
    "mpmath",
    "typing-extensions",
    "setuptools",
    "cuda-bindings",
    "cuda-pathfinder",
    "cuda-python",
    "fastrlock",
)
"""What the GPU machine's environment is taken to hold already (and nvidia-* CUDA libraries)."""


def pins() -> list[str]:
    """`name==version` of each ADDED distribution, as installed here (the unpinned name where it is not)."""
    found = []
    for name in ADDED:
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            found.append(name)
    return found


def build(folder: Path, python_version: str | None = None, platform: str | None = None) -> list[Path]:
    """Download (or build, for the source-only ones) every ADDED wheel into `folder`; the wheels there."""
    folder.mkdir(parents=True, exist_ok=True)
    target = [
        *(["--python-version", python_version] if python_version else []),
        *(["--platform", platform] if platform else []),
    ]
    wanted = pins()
    binary = [p for p in wanted if p.split("==")[0] not in BUILT_FROM_SOURCE]
    source = [p for p in wanted if p.split("==")[0] in BUILT_FROM_SOURCE]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "download", "--quiet", "--no-deps", "--only-binary", ":all:", *target, "-d", str(folder), *binary],
        check=True,
    )
    if source:
        subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(folder), *source], check=True)
    return sorted(folder.glob("*.whl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.gpu_check.wheels", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--python-version", help="the target's Python, e.g. 3.12 (default: this one)")
    parser.add_argument("--platform", help="the target's platform tag, e.g. manylinux_2_28_x86_64 (default: this)")
    args = parser.parse_args(argv)
    wheels = build(args.folder, args.python_version, args.platform)
    size = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    print(f"{size / 2**20:7.2f} MiB  in {len(wheels)} wheels: {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
