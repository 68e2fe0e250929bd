"""Sweeps on a SLURM cluster, through hydra-submitit-launcher (`hydra/launcher=slurm`): the check of what the
sweep asks SLURM for before any job is queued (`suite.sweep.cluster.request`), the watch that tells a cancelled or
lost job from a running one (`suite.sweep.cluster.watch`), and a single-node SLURM on this machine to try the launcher
and to test it against (`suite.sweep.cluster.local`, `nox -s slurm`).
"""
