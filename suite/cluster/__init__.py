"""Sweeps on a SLURM cluster, through hydra-submitit-launcher (`hydra/launcher=slurm`): the check of what the
sweep asks SLURM for before any job is queued (`suite.cluster.request`), the watch that tells a cancelled or
lost job from a running one (`suite.cluster.watch`), and a single-node SLURM on this machine to try the launcher
and to test it against (`suite.cluster.local`, `nox -s slurm`).
"""
