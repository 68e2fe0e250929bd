"""The wheel folder is complete: installed with `pip install --no-index --no-deps --target` into an empty folder,
beside an environment that holds only the CUDA stack, every module of the suite imports.

The CPU test environment stands in for the GPU machine's: in a child Python, every top-level module whose
distribution is neither in `wheels.CUDA_STACK` (nor an nvidia-* library, nor fusebench itself) may be found only
in the target folder, so a distribution the list forgot fails the import that needs it. Building the folder
needs a package index (it downloads about 55 MiB, pyarrow most of it); offline, the test is skipped and says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suite.gpu_check import wheels

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = "submitit,hydra-submitit-launcher,hydra-joblib-launcher,joblib"
"""The cluster launchers' distributions (the slurm and pool extras): modules that need them may fail to import
without the check needing them."""

CHILD = textwrap.dedent('''
    import importlib, importlib.machinery, importlib.metadata, pkgutil, sys
    target, stack, optional = sys.argv[1], set(sys.argv[2].split(",")), set(sys.argv[3].split(","))
    owners = importlib.metadata.packages_distributions()
    norm = lambda d: d.lower().replace("_", "-")

    class OnlyFromTarget:
        """Modules of distributions the CUDA stack lacks come from the target folder or not at all."""
        def find_spec(self, name, path=None, target_=None):
            top = name.split(".")[0]
            dists = {norm(d) for d in owners.get(top, [])}
            if name != top or not dists or dists & stack or any(d.startswith("nvidia-") for d in dists):
                return None
            if "fusebench" in dists:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, [target])
            if spec is None:
                raise ModuleNotFoundError(f"{name} (from {sorted(dists)}) is not in the wheel folder")
            return spec

    sys.meta_path.insert(0, OnlyFromTarget())
    failed = []
    for package in ("suite", "backends", "scenarios"):
        module = importlib.import_module(package)
        names = [package] + [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")]
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:
                if not any(f"'{d}'" in str(exc) for d in optional):  # a cluster launcher's module: not the check's
                    failed.append(f"{name}: {type(exc).__name__}: {exc}")
    print("\\n".join(failed) or "every module imported")
    sys.exit(1 if failed else 0)
''')


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    try:
        wheels.build(out)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no package index answers here: building the wheel folder failed ({exc})")
    return out


def test_the_folder_is_small_and_pinned(folder: Path) -> None:
    found = sorted(folder.glob("*.whl"))
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in found}
    assert names == {n.lower().replace("_", "-") for n in wheels.ADDED}
    assert sum(w.stat().st_size for w in found) < 80 * 2**20


def test_installed_into_an_empty_target_every_suite_module_imports(folder: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                    str(target), *map(str, sorted(folder.glob("*.whl")))], check=True)  # fmt: skip
    stack = ",".join(wheels.CUDA_STACK)
    done = subprocess.run([sys.executable, "-c", CHILD, str(target), stack, OPTIONAL], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_a_missing_wheel_is_caught(folder: Path, tmp_path: Path) -> None:
    """The check can fail: without omegaconf's wheel, the suite's imports of Hydra fail in the child."""
    target = tmp_path / "target"
    kept = [str(w) for w in sorted(folder.glob("*.whl")) if not w.name.startswith("omegaconf")]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                    str(target), *kept], check=True)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CHILD, str(target), ",".join(wheels.CUDA_STACK), OPTIONAL], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1 and "omegaconf" in done.stdout
