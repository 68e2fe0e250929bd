"""Mean token cross-entropy from hidden states through the LM head, the logits held a chunk of tokens at a time
against all at once (see `scenario`). Importing the package registers the scenario.
"""

from scenarios.linear_cross_entropy.scenario import LinearCrossEntropy, chunks, liger_chunk, linear_ce_ledger

__all__ = ["LinearCrossEntropy", "chunks", "liger_chunk", "linear_ce_ledger"]
