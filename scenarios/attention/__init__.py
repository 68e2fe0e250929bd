"""Attention: O = softmax(Q·Kᵀ/√d + mask)·V, the headline case for fusion and for a tuned library rival (see
`scenario`). Importing the package registers it; the names tests use are re-exported here.
"""

from scenarios.attention.scenario import (
    AXES,
    TILES,
    Attention,
    grouped,
    key_extent,
    key_rows_streamed,
    kv_heads,
    scores_per_head,
    slabs,
    storage_precision,
)

__all__ = [
    "AXES",
    "TILES",
    "Attention",
    "grouped",
    "key_extent",
    "key_rows_streamed",
    "kv_heads",
    "scores_per_head",
    "slabs",
    "storage_precision",
]
