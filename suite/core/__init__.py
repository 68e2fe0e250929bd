"""The core every plug-in imports: registry, Scenario and Target protocols, ledger, numerics, the verdict rule,
and the results-table views and chart look (tidy, markdown, chartkit) a scenario family draws its own with."""
