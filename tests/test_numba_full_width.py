"""Numba's CPU kernels at the host's full vector width: LLVM's prefer-256-bit tuning off on an AVX-512 host, a
user's target or FUSEBENCH_NUMBA_WIDTH=llvm left alone, and the choice recorded."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from llvmlite import binding

import backends.numba  # noqa: F401  (turns the width on, as every run does)
from backends.numba import full_width
from suite.run import provenance

AVX512 = binding.get_host_cpu_features().get("avx512f", False)


def test_a_user_target_or_the_opt_out_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    monkeypatch.setenv("NUMBA_CPU_NAME", "znver3")
    full_width.use_full_width()
    assert "NUMBA_CPU_FEATURES" not in os.environ
    assert full_width.setting() is None
    assert provenance.numba_vector_width() == {}
    monkeypatch.delenv("NUMBA_CPU_NAME")
    monkeypatch.setenv(full_width.OPT_OUT, "llvm")
    full_width.use_full_width()
    assert "NUMBA_CPU_FEATURES" not in os.environ
    assert full_width.setting() == "llvm"
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")  # the user's own features
    monkeypatch.delenv(full_width.OPT_OUT)
    full_width.use_full_width()
    assert os.environ["NUMBA_CPU_FEATURES"] == "+avx2"
    assert full_width.setting() is None


@pytest.mark.skipif(not AVX512, reason="the host has no AVX-512: LLVM's width is the host's full width already")
def test_on_an_avx512_host_loops_are_vectorised_in_zmm_registers() -> None:
    import numba

    if numba.config.CPU_NAME or (numba.config.CPU_FEATURES or "").split(",")[-1] != full_width.OFF:
        pytest.skip("this process was given a Numba target of its own, or FUSEBENCH_NUMBA_WIDTH=llvm")
    assert full_width.setting() == "full" and full_width.builds_for_host()
    assert provenance.numba_vector_width() == {"numba_vector_width": "full"}

    @numba.njit(fastmath={"reassoc"})
    def total(x):  # type: ignore[no-untyped-def]
        s = np.float32(0)
        for v in x:
            s += v * v
        return s

    x = np.arange(1, 101, dtype=np.float32)
    assert total(x) == pytest.approx(float(np.sum(x.astype(np.float64) ** 2)), rel=1e-6)
    asm = "\n".join(total.inspect_asm().values())
    # zmm registers appear at LLVM's width too (gathers of the strided path); its arithmetic is what must widen
    assert re.search(r"v(?:fmadd\w*|mul|add)ps\s[^\n]*zmm", asm), "the sum's loop was not built with 512-bit vectors"
