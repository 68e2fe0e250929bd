"""The Hydra node of swiglu as a structured config: conf/scenario/swiglu.yaml starts from it, so a key the family
does not have is refused before anything runs. An axis holds one value or a list to sweep (`SwiGLU.check` says
what a value must be)."""

from dataclasses import dataclass
from typing import Any


@dataclass
class SwiGLUConfig:
    name: str = "swiglu"
    rows: Any = None
    """Rows (tokens) of a and b: an integer, or a list to sweep; None takes the preset's."""
    cols: Any = None
    """Columns of a and b (the intermediate size; the charts' size axis)."""
