"""Cross-entropy's constants, apart from the scenario so that its backward pass (which the scenario imports) and
linear cross-entropy read them without an import cycle."""

IGNORE_INDEX = -100
"""A target that adds nothing to the loss (PyTorch's default), nor to the gradient."""
TARGET_BYTES = 8
"""Targets are int64."""
LOSS_BYTES = 4
"""Per-token losses are float32 in every variant."""
