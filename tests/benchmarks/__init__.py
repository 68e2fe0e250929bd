"""fusebench's registry cases as pytest-benchmark benchmarks (`nox -s benchmark`); not part of the test suite."""
