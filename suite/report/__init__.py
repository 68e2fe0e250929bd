"""The report: tidy frames, generic charts, verdicts, causes, resource pressure and the markdown report."""
