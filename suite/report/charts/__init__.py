"""Scenario-family charts and report sections beyond the generic ones (see suite.report.extras)."""
