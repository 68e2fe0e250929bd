"""A pre-norm decoder layer composed from the registry's own kernels (see `scenario`). Importing the package
registers the family; the names backends and tests use are re-exported here.
"""

from scenarios.decoder_layer.chain import OPS, VARIANTS, op_params, op_variants, steps
from scenarios.decoder_layer.ledger import layer_ledger
from scenarios.decoder_layer.scenario import DecoderLayer

__all__ = ["OPS", "VARIANTS", "DecoderLayer", "layer_ledger", "op_params", "op_variants", "steps"]
