"""The decoder_layer family's Hydra node as a structured config: conf/scenario/decoder_layer.yaml starts from it, so
a key the family does not have is refused before anything runs. Values are typed `Any`: an axis holds one value or
a list to sweep, and `DecoderLayer.check` says what a value must be."""

from dataclasses import dataclass
from typing import Any


@dataclass
class DecoderLayerConfig:
    name: str = "decoder_layer"
    tokens: Any = None
    """Tokens of the one sequence (batch 1; the charts' size axis): an integer, or a list to sweep."""
    hidden: Any = None
    """The model's hidden size."""
    heads: Any = None
    """Query heads."""
    kv_heads: Any = None
    """Key and value heads, dividing `heads` (grouped-query attention)."""
    head_dim: Any = None
    """Values per head, even (rope pairs them)."""
    intermediate: Any = None
    """The MLP's intermediate size (columns of the gate and up projections)."""
    rope_pairing: Any = None
    """`half` (rotate_half: Llama, Hugging Face) or `interleaved` (GPT-J, Meta's original)."""
    lm_head: Any = None
    """Whether the model's head follows the layer (final add + RMSNorm, the LM head and its loss): a bool, or a
    list to sweep; false by default."""
    vocab: Any = None
    """The head's vocabulary (with `lm_head` only; a model's `vocab_size` under experiment=model_decoder_layer)."""
