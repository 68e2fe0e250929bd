"""How fusebench tells a user to install what is missing: always through one of its own extras
(pyproject.toml's [project.optional-dependencies]), from the checkout, as nox installs it, so the versions the
suite pins come along. Every hint the suite prints is built here; tests/test_install_hints.py holds each extra
named against pyproject.toml."""

from __future__ import annotations


def hint(extra: str, instead: str = "") -> str:
    """`pip install -e '.[cuda]'`; with `instead`, the extra to use on a machine without a GPU as well."""
    text = f"pip install -e '.[{extra}]'"
    return f"{text} (without a GPU: '.[{instead}]')" if instead else text


CUDA_STACK = hint("cuda", instead="cpu")
"""What installs CuPy and numba-cuda: the CUDA extra, or the CPU one (NVRTC builds and the CUDA simulator)."""
