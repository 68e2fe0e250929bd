"""Refactoring guard: the preset-S run of every family on the CPU gives the rows it gave before (seed 7).

tests/golden/preset_s_cpu.csv holds, per (case, implementation), the status, the ledger's bytes and FLOPs, the
launches, the maximum relative error (compared within a band, see ERROR_BAND) and the tolerance of
`python -m suite scenario=<family> preset=S timing=quick seed=7 device=cpu`, as measured before the suite was
reorganised into layers (the six textbook families) and before one registration and a run as a value (the five
transformer families, added then). Timings aside, nothing a user reads may change when the machinery is
restructured; a change meant to alter these numbers regenerates the file and says why in its commit. Rows of
variants added since (torch's `eager` and `compiled`) are checked by the kernel tests; here they may only add to
the table, never replace a golden row.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from suite.core.scenario import discover
from suite.run.runner import run
from tests.conftest import make_config

SCENARIOS = discover()

GOLDEN = pd.read_csv(Path(__file__).parent / "golden" / "preset_s_cpu.csv", dtype={"params": str})
KEY = ["scenario", "params", "dtype", "backend", "device", "variant"]
EXACT = ["status", "bytes_modeled", "bytes_read", "bytes_written", "flops_modeled", "launches"]
CLOSE = ["tolerance"]
ERROR_BAND = 0.1
"""max_rel_err may differ from the golden value by this fraction of the row's tolerance. Numba compiles for the
host CPU: its vector width (AVX2 or AVX-512) orders a row's reductions differently, which moves the last digits of
a float32 row's error between machines (layernorm at 193 columns: 0.00072 on one, 0.00113 on another, tolerance
0.0106). A kernel that refactoring broke is off by more than its tolerance, far outside the band."""
MEASURED_TOLERANCE = {
    "attention": 0.3,
    "add_rmsnorm": 0.3,
    "swiglu": 0.3,
    "rope": 0.3,
    "cross_entropy": 0.3,
    "linear_cross_entropy": 0.3,
}
"""Families whose tolerance is measured rather than derived (attention's: four times the error of its float32
decomposition done by NumPy), and how far it may move: NumPy's float32 matmul goes through OpenBLAS, which picks
its kernel for the host CPU (its blocking orders the sums), so that error, and the tolerance, differ between an
AMD and an Intel host (seq_len 64: 0.000599 on one, 0.000532 on the other). Derived tolerances must match to
1e-6. The transformer families' tolerances are four times the error of their decomposition emulated with
NumPy in float32 or half storage (exp, sums, the LM head's GEMM), whose SIMD kernels NumPy and OpenBLAS pick for
the host CPU: like attention's, they may move between hosts, within the same band."""
ADDED = {("torch", "eager"), ("torch", "compiled")}
"""(backend, variant) of rows that did not exist when the golden file was taken."""
UNCOMPILED = "compiled"
"""torch.compile's rows are left out: each compiles cold here (a minute of CI per family), and tests/
test_torch_compiled.py checks them. Naming the variants makes the run strict: a case runs variants it would not
compare (matmul's `tiled` beside an epilogue); those rows, not in the golden file, are dropped before the
comparison, so a golden row that turned `unsupported` still fails it. A backend without one of them has no row
for it (no kernel registered), strict or not."""


@pytest.mark.parametrize("family", sorted(GOLDEN["scenario"].unique()))
def test_preset_s_rows_unchanged(family, tmp_path):
    cfg = make_config(f"scenario={family}", "preset=S", "timing=quick", "seed=7", "device=cpu", "isolate=false",
                      _variants(family), "strict=false")  # fmt: skip
    got = run(cfg, tmp_path, show_progress=False).table
    got["params"] = got["params"].astype(str)
    want = GOLDEN[GOLDEN["scenario"] == family].set_index(KEY).sort_index()
    golden = set(want.index)
    scn = SCENARIOS[family]
    strict_only = [s == "unsupported" or v not in scn.variants_for(json.loads(p))
                   for s, v, p in zip(got["status"], got["variant"], got["params"], strict=True)]  # fmt: skip
    got = got[[k in golden or not extra for k, extra in zip(_keys(got), strict_only, strict=True)]]
    added = [(b, v) in ADDED for b, v in zip(got["backend"], got["variant"], strict=True)]
    assert (got[added]["status"] == "ok").all(), got[added][["variant", "params", "reason"]]
    got = got[[not a for a in added]].set_index(KEY).sort_index()
    assert list(got.index) == list(want.index)
    for column in EXACT:
        assert got[column].fillna(-1).tolist() == want[column].fillna(-1).tolist(), column
    for column in CLOSE:
        a, b = got[column].to_numpy(float), want[column].to_numpy(float)
        rtol = MEASURED_TOLERANCE.get(family, 1e-6)
        assert np.allclose(a, b, rtol=rtol, atol=0, equal_nan=True), (column, a, b)
    err, tol, golden = (
        got["max_rel_err"].to_numpy(float),
        got["tolerance"].to_numpy(float),
        want["max_rel_err"].to_numpy(float),
    )
    off = np.abs(err - golden) > ERROR_BAND * tol
    assert not off.any(), got[off][["max_rel_err", "tolerance"]].assign(golden=golden[off])


def _variants(family: str) -> str:
    return f"variants=[{','.join(v for v in SCENARIOS[family].variants if v != UNCOMPILED)}]"


def _keys(frame: pd.DataFrame) -> list[tuple]:
    return list(frame[KEY].itertuples(index=False, name=None))
