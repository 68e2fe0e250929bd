"""Numba's CPU kernels at the host's full vector width: LLVM's preference for 256-bit vectors turned off on an
AVX-512 host.

LLVM's models of Intel's AVX-512 cores (Skylake-X to Emerald Rapids) carry a tuning flag, `prefer-256-bit`,
under which the loop vectoriser builds ymm code though zmm registers are there: a choice made for mixed code on
cores whose clocks dropped under 512-bit work. Numba builds for the host's model, so every loop LLVM vectorises
(the exponentials of softmax, cross-entropy, SwiGLU and the chains' transcendentals; every row loop) ran at half
the host's width on such a host, while torch's CPU kernels, and the C++ torch.compile generates, use its ISA
(`torch.backends.cpu.get_cpu_capability()`: AVX512 there). Cross-entropy's fused
row kernel, bound by its exponentials, took 1.4× as long at 256 bits as at 512 on the 2-core Emerald Rapids CI
host (58 against 42 ms, 2,048 tokens × 50,257 float32 logits, runs alternated, nothing else running).
The micro-kernels that keep explicit vectors (`on_cpu.vector_width`) were never affected.

`use_full_width` turns the flag off by handing Numba the host's own feature string plus `-prefer-256-bit`
(NUMBA_CPU_FEATURES, in the environment too, so that worker processes and Numba's re-reading of its
configuration keep it). It must run before Numba builds its first CPU function; the backend's package calls it
on import. A user's NUMBA_CPU_NAME or NUMBA_CPU_FEATURES wins, and FUSEBENCH_NUMBA_WIDTH=llvm keeps LLVM's
choice (to compare the two). The run's environment.json records which (`numba_vector_width`).
"""

from __future__ import annotations

import os

OFF = "-prefer-256-bit"
OPT_OUT = "FUSEBENCH_NUMBA_WIDTH"


def own_features() -> str | None:
    """The feature string this module hands Numba on this host, or None where it hands none (no AVX-512F, or
    llvmlite missing)."""
    try:
        from llvmlite import binding
    except ImportError:
        return None
    features = binding.get_host_cpu_features()
    return f"{features.flatten()},{OFF}" if features.get("avx512f", False) else None


def use_full_width() -> None:
    """Hand Numba the full-width feature string unless the user chose a target or LLVM's width."""
    if os.environ.get(OPT_OUT) == "llvm" or os.environ.get("NUMBA_CPU_NAME"):
        return
    ours = own_features()
    if ours is None or os.environ.get("NUMBA_CPU_FEATURES", ours) != ours:
        return
    os.environ["NUMBA_CPU_FEATURES"] = ours
    import numba

    numba.config.CPU_FEATURES = ours


def builds_for_host() -> bool:
    """Whether Numba compiles for this host's own ISA: no target named, and no features but the host's own (with
    or without the width flag). NUMBA_CPU_NAME=znver3 on an AVX-512 host, say, builds AVX2 code."""
    import numba

    return not numba.config.CPU_NAME and numba.config.CPU_FEATURES in (None, own_features())


def setting() -> str | None:
    """What this process's CPU kernels were built with, as the environment says: "full" (the flag off on an
    AVX-512 host), "llvm" (LLVM's own choice: no AVX-512, or FUSEBENCH_NUMBA_WIDTH=llvm), None where the user
    named another target or features."""
    chosen = os.environ.get("NUMBA_CPU_FEATURES")
    if os.environ.get("NUMBA_CPU_NAME") or (chosen and chosen != own_features()):
        return None
    return "full" if chosen else "llvm"
