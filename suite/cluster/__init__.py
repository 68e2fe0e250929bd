"""Sweeps on a SLURM cluster: the Hydra launcher fusebench uses there (`suite.cluster.launcher`), the check of its
request before any job is queued (`suite.cluster.request`), the watch that tells a lost or cancelled job from a
running one (`suite.cluster.watch`), and a single-node SLURM on the local machine to test all of it against
(`suite.cluster.local`, `nox -s slurm`).
"""
