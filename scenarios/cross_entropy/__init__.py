"""Mean token cross-entropy from logits and integer targets: one online pass per row against log-softmax
materialised (see `scenario`). Importing the package registers the scenario.
"""

from scenarios.cross_entropy.scenario import IGNORE_INDEX, CrossEntropy, ce_ledger, make_targets, mean_loss

__all__ = ["IGNORE_INDEX", "CrossEntropy", "ce_ledger", "make_targets", "mean_loss"]
