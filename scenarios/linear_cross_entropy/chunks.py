"""How the fused variant splits the tokens, apart from the scenario so that its backward pass (which the scenario
imports) reads it without an import cycle."""


def chunks(tokens: int, chunk: int) -> list[tuple[int, int]]:
    """The [start, stop) token ranges of the fused variant, the last one ragged."""
    return [(start, min(start + chunk, tokens)) for start in range(0, tokens, chunk)]


def liger_chunk(tokens: int, hidden: int, vocab: int) -> int:
    """The chunk Liger-Kernel's fused linear cross-entropy picks (0.8.x, chunk_mem_const 1): the tokens split into
    ⌈vocab/hidden⌉ parts, rounded up to a power of two, so that a chunk's logits are about the hidden states' size."""
    parts = -(-vocab // hidden)
    return min(tokens, 1 << max(0, (-(-tokens // parts) - 1).bit_length()))
