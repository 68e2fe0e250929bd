"""A single-node SLURM on this machine, to try the SLURM launcher and to test it against a real scheduler:
`python -m suite.sweep.cluster.local [--install] -- COMMAND ...` brings one up, runs COMMAND with `SLURM_CONF` pointing
at it, and stops it again, even when COMMAND fails or is interrupted (`nox -s slurm` runs the launcher tests so).

Everything lives in one temporary folder: a generated slurm.conf, its own munge key and socket, the state and
spool folders and the logs. Nothing of the machine's own configuration is read or changed (/etc/slurm stays as
it is), the ports are free ones picked at start, and the daemons run in the foreground as children of this
process, so they are stopped by their pids. The node takes what `slurmd -C` finds (CPUs, cores, memory); jobs
are bound to the cores they were given (`task/affinity`), so a job's Numba threads follow its allocation and two
jobs on the node do not time each other. There is no accounting (no slurmdbd): the launcher's watch reads job
states from squeue (`suite.sweep.cluster.watch`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
"""Debian's packages for the daemons (slurmctld, slurmd, the client commands) and the authentication they use."""
PARTITION = "debug"
UP_TIMEOUT_S = 60.0


@dataclass
class Cluster:
    """A running single-node SLURM: where its files are, the environment its commands need, what the node has."""

    directory: Path
    node: str
    cpus: int
    memory_mb: int
    partition: str = PARTITION
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.directory / "slurm.conf")}


def install(say: Callable[[str], None] = print) -> None:
    """Install the Debian packages where the daemons are missing (root and apt needed)."""
    if all(shutil.which(b) for b in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            f"SLURM is not installed and this is not root with apt-get: apt-get install {' '.join(PACKAGES)}"
        )
    say(f"local SLURM: installing {' '.join(PACKAGES)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], check=True, env=env, stdout=subprocess.DEVNULL)


def node_spec() -> tuple[str, int, int, str]:
    """(node name, CPUs, memory in MB, the NodeName line's hardware fields) as `slurmd -C` finds them here."""
    found = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    fields = dict(f.split("=", 1) for f in found.split() if "=" in f)
    hardware = " ".join(
        f"{k}={fields[k]}"
        for k in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
        if k in fields
    )
    return fields["NodeName"], int(fields["CPUs"]), int(fields["RealMemory"]), hardware


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def config(directory: Path, node: str, cpus: int, memory_mb: int, hardware: str) -> str:
    """slurm.conf for one node that is also the controller: cores and memory are the consumable resources, every
    job gets a share of memory per CPU unless it asks, no GRES, no accounting."""
    ctld, slurmd = _free_ports(2)
    d = directory
    return "\n".join(
        [
            "ClusterName=fusebench",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={d / 'munge.socket'}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            f"DefMemPerCPU={max(1, min(1024, memory_mb // cpus))}",
            "ReturnToService=2",
            "KillWait=5",  # a cancelled job is killed 5 s after SIGTERM (submitit lets it run on through SIGTERM)
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={node} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _start(cluster: Cluster, name: str, command: list[str]) -> None:
    log = (cluster.directory / f"{name}.out").open("wb")
    cluster.processes[name] = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=cluster.env, start_new_session=True
    )


def up(directory: Path | None = None) -> Cluster:
    """Start munged, slurmctld and slurmd in the foreground (children of this process) and wait for the node to
    be idle. Stops whatever it started and raises, with the daemon's log, if the node does not come up."""
    node, cpus, memory_mb, hardware = node_spec()
    d = Path(directory or tempfile.mkdtemp(prefix="fusebench-slurm-"))
    for sub in ("state", "spool"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "slurm.conf").write_text(config(d, node, cpus, memory_mb, hardware))
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    cluster = Cluster(d, node, cpus, memory_mb)
    try:
        _start(
            cluster,
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={d / 'munge.socket'}",
                f"--key-file={key}",
                f"--pid-file={d / 'munged.pid'}",
                f"--log-file={d / 'munged.log'}",
                f"--seed-file={d / 'munged.seed'}",
            ],
        )
        _wait(lambda: (d / "munge.socket").exists(), cluster, "munged")
        _start(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(d / "slurm.conf")])
        _start(cluster, "slurmd", ["slurmd", "-D", "-N", node, "-f", str(d / "slurm.conf")])
        _wait(lambda: _node_state(cluster) == "idle", cluster, "slurmd")
    except BaseException:
        down(cluster)
        raise
    return cluster


def _node_state(cluster: Cluster) -> str:
    done = subprocess.run(
        ["sinfo", "-h", "-n", cluster.node, "-o", "%t"], capture_output=True, text=True, env=cluster.env
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _wait(ready: Callable[[], bool], cluster: Cluster, name: str) -> None:
    deadline = time.monotonic() + UP_TIMEOUT_S
    while not ready():
        dead = [n for n, p in cluster.processes.items() if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not ready after {UP_TIMEOUT_S:.0f} s"
            raise RuntimeError(f"local SLURM: {why}; {name}'s log:\n{_log_tail(cluster, dead[0] if dead else name)}")
        time.sleep(0.2)


def _log_tail(cluster: Cluster, name: str, lines: int = 20) -> str:
    text = ""
    for path in (cluster.directory / f"{name}.out", cluster.directory / f"{name}.log"):
        if path.exists():
            text += path.read_text(errors="replace")
    return "\n".join(text.strip().split("\n")[-lines:])


def down(cluster: Cluster, grace_s: float = 10.0) -> None:
    """Cancel the jobs left on the cluster, then stop slurmd, slurmctld and munged by their pids (SIGTERM, then
    SIGKILL after `grace_s`)."""
    if cluster.processes.get("slurmctld") and cluster.processes["slurmctld"].poll() is None:
        subprocess.run(
            ["scancel", "--full", "--partition", cluster.partition], env=cluster.env, capture_output=True, timeout=30
        )
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _jobs_left(cluster):
            time.sleep(0.5)
    for name in ("slurmd", "slurmctld", "munged"):
        proc = cluster.processes.get(name)
        if proc is None or proc.poll() is not None:
            continue
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _jobs_left(cluster: Cluster) -> bool:
    done = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=cluster.env, timeout=30)
    return done.returncode == 0 and bool(done.stdout.strip())


@contextmanager
def running(directory: Path | None = None) -> Iterator[Cluster]:
    cluster = up(directory)
    try:
        yield cluster
    finally:
        down(cluster)


def _stop_on_sigterm() -> None:
    """SIGTERM (a CI runner giving up) unwinds like Ctrl-C, so the daemons are stopped on the way out."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.sweep.cluster.local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help=f"apt-get install {' '.join(PACKAGES)} if missing")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's folder (conf, logs) afterwards")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="what to run against it (after --)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("nothing to run: python -m suite.sweep.cluster.local -- COMMAND ...")
    _stop_on_sigterm()
    started = time.monotonic()
    if args.install:
        install()
    installed = time.monotonic()
    cluster = up()
    ready = time.monotonic()
    print(
        f"local SLURM: node {cluster.node} ({cluster.cpus} CPUs, {cluster.memory_mb} MB), partition "
        f"{cluster.partition}, up in {ready - installed:.1f} s (install {installed - started:.1f} s); "
        f"SLURM_CONF={cluster.directory / 'slurm.conf'}",
        flush=True,
    )
    status = 1
    try:
        status = subprocess.run(command, env={**cluster.env, "FUSEBENCH_SLURM_PARTITION": cluster.partition}).returncode
    finally:
        finished = time.monotonic()
        down(cluster)
        print(
            f"local SLURM: {' '.join(command[:2])} took {finished - ready:.1f} s (status {status}); stopped in "
            f"{time.monotonic() - finished:.1f} s",
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(cluster.directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
