"""The run: config schema, validation and planning, the worker, execution, timing, ceilings, the table."""
