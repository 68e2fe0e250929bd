"""The report machinery: generic charts, verdicts, causes, resource pressure and report.md, for any scenario.

It knows no family by name: what a family adds (its labels, charts and sections) it declares on its `Scenario`.
"""
