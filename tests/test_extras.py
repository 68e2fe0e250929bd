"""The install extras keep every backend importable: an extra that brings numba-cuda bounds NumPy below the
release that removed the `np.row_stack` numba-cuda overloads at import (2.5), so a fresh GPU install does not
silently skip every Numba CUDA row; the CPU extra pins torch to the one CPU wheel (any other version downloads a
CUDA build)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and newer

EXTRAS = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _requirements(extra: str) -> dict[str, Requirement]:
    return {(r := Requirement(text)).name: r for text in EXTRAS[extra]}


def test_every_extra_with_numba_cuda_keeps_numpy_below_2_5() -> None:
    with_numba_cuda = [name for name in EXTRAS if "numba-cuda" in _requirements(name)]
    assert sorted(with_numba_cuda) == ["cpu", "cuda"]
    for name in with_numba_cuda:
        numpy = _requirements(name).get("numpy")
        assert numpy is not None, f"extra {name!r} installs numba-cuda without bounding numpy"
        assert not numpy.specifier.contains(Version("2.5.0")), (name, str(numpy.specifier))
        assert numpy.specifier.contains(Version("2.4.6")), (name, str(numpy.specifier))


def test_the_cpu_extra_pins_the_cpu_wheel_of_torch() -> None:
    torch = _requirements("cpu")["torch"]
    assert str(torch.specifier) == "==2.13.0"
