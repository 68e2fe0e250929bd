"""The linear_cross_entropy family's Hydra node as a structured config: conf/scenario/linear_cross_entropy.yaml
starts from it, so a key the family does not have is refused before anything runs. `LinearCrossEntropy.check`
says what a value must be.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class LinearCrossEntropyConfig:
    name: str = "linear_cross_entropy"
    tokens: Any = None
    """Rows of the hidden states (the charts' size axis): an integer, or a list to sweep."""
    hidden: Any = None
    """The model's hidden size: the LM head's reduction length."""
    vocab: Any = None
    """The vocabulary: columns of the logits."""
    chunk: Any = None
    """Tokens whose logits the fused variant holds at a time."""
    tile: Any = None
    """Columns the cross-entropy row kernel takes at a time: a power of two in 32..16384."""
