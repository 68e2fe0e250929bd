"""The core every plug-in imports: registry, Scenario and Target protocols, ledger, numerics, the verdict rule."""
