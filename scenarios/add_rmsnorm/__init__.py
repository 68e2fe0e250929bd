"""Residual add + RMSNorm, two outputs (h and y) from one pass (see `scenario`).

Importing the package registers the family; the names backends and tests use are re-exported here.
"""

from scenarios.add_rmsnorm.decomposition import INPUTS, NORM_STEPS, OUTPUTS, ROW_STATS, STEPS, add_rmsnorm_ledger
from scenarios.add_rmsnorm.scenario import AddRMSNorm, emulate_add_rmsnorm

__all__ = [
    "INPUTS",
    "NORM_STEPS",
    "OUTPUTS",
    "ROW_STATS",
    "STEPS",
    "AddRMSNorm",
    "add_rmsnorm_ledger",
    "emulate_add_rmsnorm",
]
