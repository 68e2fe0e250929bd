"""`python -m suite`: see suite.cli. Idle CPU thread pools are told to sleep before NumPy loads (suite.core.threads)."""

from suite.core.threads import quiet_thread_pools

quiet_thread_pools()

import sys  # noqa: E402

if __name__ == "__main__" and sys.argv[1:2] == ["gpu-check"]:  # the check of a CUDA machine: no Hydra run
    from suite.gpu_check.main import main as gpu_check

    sys.exit(gpu_check(sys.argv[2:]))

from suite.cli import main  # noqa: E402  (after the environment is set)

if __name__ == "__main__":
    main()
