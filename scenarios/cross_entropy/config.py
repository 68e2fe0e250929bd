"""The cross_entropy family's Hydra node as a structured config: conf/scenario/cross_entropy.yaml starts from it,
so a key the family does not have is refused before anything runs. `CrossEntropy.check` says what a value must be.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class CrossEntropyConfig:
    name: str = "cross_entropy"
    tokens: Any = None
    """Rows of the logits: an integer, or a list to sweep; None takes the preset's."""
    vocab: Any = None
    """Columns of the logits, the reduction's length (the charts' size axis)."""
    tile: Any = None
    """Columns a fused kernel takes at a time for its online max and sum: a power of two in 32..16384."""
