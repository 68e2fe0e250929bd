"""The elementwise chain's Hydra node as a structured config: conf/scenario/elementwise_chain.yaml starts from it,
so a key the chain does not have (scenario.rows) is refused before anything runs.

Values are typed `Any`: an axis holds one value or a list to sweep, and `ElementwiseChain.check` says what a
value must be in words Hydra's type errors cannot.
"""

from dataclasses import dataclass
from typing import Any


@dataclass
class ElementwiseChainConfig:
    name: str = "elementwise_chain"
    n: Any = None
    """Elements of x: an integer, or a list to sweep; None takes the preset's."""
    ops: Any = None
    """One chain ([scale, gelu]) or a list of chains."""
