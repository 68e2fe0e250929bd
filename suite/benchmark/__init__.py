"""What `nox -s benchmark` runs: the registry's cases as pytest-benchmark benchmarks (`tests/benchmarks/`).

It sits above the run and apart from it: it drives the run's own stages (plan, build-and-check, clocks) from
another front door, and the run never calls back into it.
"""
