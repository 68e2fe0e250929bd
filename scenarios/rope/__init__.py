"""Rotary position embedding on q and k, fused into one kernel against its materialised steps (see `scenario`).

Importing the package registers the scenario; the names backends and tests use are re-exported here.
"""

from scenarios.rope.decomposition import PAIRINGS, STEPS, RopeStep, rope_ledger
from scenarios.rope.scenario import Rope, emulate, tables

__all__ = ["PAIRINGS", "STEPS", "Rope", "RopeStep", "emulate", "rope_ledger", "tables"]
