"""SwiGLU, y = silu(a) · b: one elementwise kernel against silu into a temporary and a product (see `scenario`).

Importing the package registers the family; the names backends and tests use are re-exported here.
"""

from scenarios.swiglu.decomposition import INPUTS, STEPS, swiglu_ledger
from scenarios.swiglu.scenario import SwiGLU, emulate

__all__ = ["INPUTS", "STEPS", "SwiGLU", "emulate", "swiglu_ledger"]
