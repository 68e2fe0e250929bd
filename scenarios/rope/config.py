"""The rope family's Hydra node as a structured config: conf/scenario/rope.yaml starts from it, so a key rope does
not have (scenario.rows) is refused before anything runs.

Values are typed `Any`: an axis holds one value or a list to sweep, and `Rope.check` says what a value must be.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class RopeConfig:
    name: str = "rope"
    batch: Any = None
    """Sequences in the batch: an integer, or a list to sweep; None takes the preset's."""
    seq_len: Any = None
    """Positions per sequence (the charts' size axis)."""
    heads: Any = None
    """Query heads."""
    kv_heads: Any = None
    """Key heads (grouped-query attention: fewer than `heads`, dividing it)."""
    head_dim: Any = None
    """Values per head, even: rotation pairs two of them."""
    pairing: Any = None
    """Which two values rotate together: `half` (rotate_half, Llama/HF) or `interleaved` (GPT-J, Meta's original)."""
