"""The one error type for bad input: caught at the command line and printed as one line, exit status 2."""


class ConfigError(ValueError):
    """A configuration value the suite cannot run: the message names it and the valid choices."""
