"""Row-wise normalization: layernorm, rmsnorm and softmax, where fusion matters most (see `scenario`).

Importing the package registers the three; the names backends and tests use are re-exported here.
"""

from scenarios.normalization.decomposition import (
    DECOMPOSITIONS,
    ROW_STATS,
    STAT_BYTES,
    FusedTraffic,
    Step,
    kind,
    passes,
    reread_bytes,
)
from scenarios.normalization.scenario import (
    EPS,
    LayerNorm,
    RMSNorm,
    RowNormalization,
    Softmax,
    emulate,
)

__all__ = [
    "DECOMPOSITIONS",
    "EPS",
    "ROW_STATS",
    "STAT_BYTES",
    "FusedTraffic",
    "LayerNorm",
    "RMSNorm",
    "RowNormalization",
    "Softmax",
    "Step",
    "emulate",
    "kind",
    "passes",
    "reread_bytes",
]
