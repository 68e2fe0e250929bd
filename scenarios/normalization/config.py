"""The Hydra nodes of layernorm, rmsnorm and softmax as structured configs: conf/scenario/<name>.yaml start from
them, so a key the three do not have (scenario.n) is refused before anything runs.

The three share their axes; each has its own class so that `name` defaults to it. Values are typed `Any`: an
axis holds one value or a list to sweep, and `RowNormalization.check` says what a value must be.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class RowNormalizationConfig:
    name: str = ""
    rows: Any = None
    """Rows of x: an integer, or a list to sweep; None takes the preset's."""
    cols: Any = None
    """Columns, the normalised axis (the charts' size axis)."""
    tile: Any = None
    """Columns a fused kernel holds on chip: a power of two in 32..16384."""


@dataclass
class LayerNormConfig(RowNormalizationConfig):
    name: str = "layernorm"


@dataclass
class RMSNormConfig(RowNormalizationConfig):
    name: str = "rmsnorm"


@dataclass
class SoftmaxConfig(RowNormalizationConfig):
    name: str = "softmax"
