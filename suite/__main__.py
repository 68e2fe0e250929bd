"""`python -m suite`: see suite.cli. Idle CPU thread pools are told to sleep before NumPy loads (suite.core.threads)."""

from suite.core.threads import quiet_thread_pools

quiet_thread_pools()

from suite.cli import main  # noqa: E402  (after the environment is set)

if __name__ == "__main__":
    main()
