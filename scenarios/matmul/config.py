"""Matmul's Hydra node as a structured config: conf/scenario/matmul.yaml starts from it, so a key matmul does not
have (scenario.rows) is refused before anything runs.

Values are typed `Any`: an axis holds one value or a list to sweep (`tile` one [BM, BN, BK] or a list of them),
and `Matmul.check` says what a value must be in words Hydra's type errors cannot.
"""

from dataclasses import dataclass
from typing import Any

VARIANTS_BY_EPILOGUE = {
    "none": ("unblocked", "tiled", "library", "compiled"),
    "bias_gelu": ("unfused", "fused", "library", "eager", "compiled"),
}
"""The values of the `epilogue` axis and the variants each compares: tiling without one, fusion with one; the
compiler (torch.compile of the same ops) with both, eager torch only where it is more than one library call."""


@dataclass
class MatmulConfig:
    name: str = "matmul"
    m: Any = None
    n: Any = None
    k: Any = None
    epilogue: Any = None
    """none or bias_gelu, or a list of both."""
    tile: Any = None
    """[BM, BN, BK], or a list of them to sweep."""
