"""The Hydra node of add_rmsnorm as a structured config: conf/scenario/add_rmsnorm.yaml starts from it, so a key
the family does not have is refused before anything runs. Values are typed `Any`: an axis holds one value or a
list to sweep, and `AddRMSNorm.check` says what a value must be."""

from dataclasses import dataclass
from typing import Any


@dataclass
class AddRMSNormConfig:
    name: str = "add_rmsnorm"
    rows: Any = None
    """Rows (tokens) of x and residual: an integer, or a list to sweep; None takes the preset's."""
    cols: Any = None
    """Columns, the normalised axis (the hidden size; the charts' size axis)."""
    tile: Any = None
    """Columns a fused kernel holds on chip: a power of two in 32..16384; wider rows read x and residual twice."""
