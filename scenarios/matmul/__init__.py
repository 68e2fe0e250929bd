"""Matmul tiling: C = A·B, optionally with a fused bias+gelu epilogue (see `scenario`). Importing the package
registers it; the names backends and tests use are re-exported here.
"""

from scenarios.matmul.scenario import (
    EPILOGUE_FLOPS,
    EPILOGUES,
    SMALL_TILES,
    SWEEP,
    TILE_SIZES,
    VARIANTS_BY_EPILOGUE,
    Matmul,
    gelu,
    tiled_reads,
)

__all__ = [
    "EPILOGUES",
    "EPILOGUE_FLOPS",
    "SMALL_TILES",
    "SWEEP",
    "TILE_SIZES",
    "VARIANTS_BY_EPILOGUE",
    "Matmul",
    "gelu",
    "tiled_reads",
]
