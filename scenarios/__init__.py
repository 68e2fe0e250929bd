"""Scenario families: what is computed, its float64 reference, presets, decomposition and traffic ledger."""
