"""swiglu's report section: per case, the temporary fusion removes (launches, bytes, ΔQ, peak memory) beside the
measured speedups. The ledger has the shape of add_rmsnorm's (unfused, fused, removed intermediates, peaks), so
the table and the lines are that family's (`scenarios.add_rmsnorm.report`), titled for this one."""

from __future__ import annotations

import pandas as pd

from scenarios.add_rmsnorm.report import fusion_section as _section


def fusion_section(frame: pd.DataFrame) -> str:
    return _section(frame, "What fusion removed (swiglu): the silu temporary")
