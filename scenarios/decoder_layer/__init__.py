"""A pre-norm decoder layer composed from the registry's own kernels (see `scenario`). Importing the package
registers the family; the names backends and tests use are re-exported here.
"""

from scenarios.decoder_layer.chain import ALL_OPS, HEAD, OPS, VARIANTS, op_params, op_variants, ops_of, steps
from scenarios.decoder_layer.ledger import layer_ledger
from scenarios.decoder_layer.scenario import DecoderLayer

__all__ = [
    "ALL_OPS",
    "HEAD",
    "OPS",
    "VARIANTS",
    "DecoderLayer",
    "layer_ledger",
    "op_params",
    "op_variants",
    "ops_of",
    "steps",
]
