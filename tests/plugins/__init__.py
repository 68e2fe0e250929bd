"""Plug-ins defined inside the tests, to prove a backend or a scenario family needs no edit of `suite/`."""
