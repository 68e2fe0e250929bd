"""Scenario families, one package each: what is computed, its float64 reference, presets, decomposition and
traffic ledger (`scenario.py`), its Hydra node (`config.py`) and its own charts and report sections.

`suite.core.scenario.discover` imports every package here once per process, and the families a third party
declares in the `fusebench.scenarios` entry-point group. A family imports only `suite.core` (and libraries):
the machinery reaches it through the hooks of the `Scenario` base, never the other way round.
"""
