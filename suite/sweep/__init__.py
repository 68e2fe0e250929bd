"""A sweep: the jobs of a Hydra multirun and their merge into one table.

`merge` expands the sweep's overrides into jobs and merges their rows, charts and report at the end; `job` runs
one job of it (in a launcher's process); `callbacks` is Hydra's hook at the multirun's end; `jobstate` is the
state a job leaves on disk (started, finished, failed) so a merge and a resume know what ran; `placement` gives
a job its GPU or the machine's CPUs; `cluster` submits a sweep to SLURM and brings up a local one for the tests.
"""
