"""How the fused variant splits the tokens, apart from the scenario so that its backward pass (which the scenario
imports) reads it without an import cycle."""


def chunks(tokens: int, chunk: int) -> list[tuple[int, int]]:
    """The [start, stop) token ranges of the fused variant, the last one ragged."""
    return [(start, min(start + chunk, tokens)) for start in range(0, tokens, chunk)]
