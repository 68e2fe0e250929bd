"""Row-wise normalization: layernorm, rmsnorm and softmax, where fusion matters most (see `scenario`).

Importing the package registers the three; the names backends and tests use are re-exported here.
"""

from scenarios.normalization.scenario import (
    DECOMPOSITIONS,
    EPS,
    ROW_STATS,
    STAT_BYTES,
    FusedTraffic,
    LayerNorm,
    RMSNorm,
    RowNormalization,
    Softmax,
    Step,
    emulate,
    kind,
    passes,
    reread_bytes,
)

__all__ = ["DECOMPOSITIONS", "EPS", "ROW_STATS", "STAT_BYTES", "FusedTraffic", "LayerNorm", "RMSNorm",
           "RowNormalization", "Softmax", "Step", "emulate", "kind", "passes", "reread_bytes"]  # fmt: skip
