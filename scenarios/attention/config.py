"""Attention's Hydra node as a structured config: conf/scenario/attention.yaml starts from it, so a key attention
does not have (scenario.cols) is refused before anything runs.

Values are typed `Any`: an axis holds one value or a list to sweep, and `Attention.check` says what a value must
be in words Hydra's type errors cannot.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class AttentionConfig:
    name: str = "attention"
    batch: Any = None
    heads: Any = None
    """Query heads."""
    kv_heads: Any = None
    """Key/value heads, dividing `heads`: each serves heads/kv_heads query heads (grouped-query attention)."""
    seq_len: Any = None
    """Keys = queries per head: the charts' size axis."""
    head_dim: Any = None
    causal: Any = None
    block_m: Any = None
    """Query tile of the tiled kernels, fused and unfused."""
    block_n: Any = None
    """Key/value tile."""
