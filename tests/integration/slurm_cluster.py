"""A Slurm cluster for the integration tests: find one, start one, provide blocks on it, see its jobs go.

The session fixture ``slurm_cluster`` (``tests/integration/conftest.py``) calls :func:`provide_cluster`
once, which decides in this order:

1. ``sinfo`` shows a node that accepts jobs: use that cluster and leave it running.
2. ``SCALPEL_TEST_SLURM=1``: start the single-host cluster with ``scripts/slurm/start.sh`` (root;
   it installs Slurm when missing) and stop it with ``stop.sh`` at the end of the session. A cluster
   that fails to start fails the tests: the variable promises that they run.
3. Otherwise the tests are skipped, and the reason names the command that enables them.

Tests build their blocks with :func:`slurm_provider` and check, after ``dfk.cleanup()``, that their
jobs left the queue with :func:`wait_for_jobs_to_leave`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from parsl.launchers import SingleNodeLauncher
from parsl.providers import SlurmProvider

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPTS = REPOSITORY / "scripts" / "slurm"
ENABLE_VARIABLE = "SCALPEL_TEST_SLURM"
PARTITION_VARIABLE = "SCALPEL_TEST_SLURM_PARTITION"
SKIP_REASON = (
    "no Slurm cluster: `sinfo` shows no idle node; start one with `sudo scripts/slurm/start.sh`, "
    f"or set {ENABLE_VARIABLE}=1 to have the tests start and stop it (as root)"
)
# Node states in which a node accepts a new job that does not need the whole node. A suffix
# ("idle*": not responding, "idle~": powered off, "mix$": maintenance...) means it does not.
ACCEPTING_STATES = ("idle", "mix")
# Parsl's SlurmProvider asks squeue about its blocks every 60 s, fixed; a block that fails would
# keep a test waiting that long. A single-host cluster answers squeue in milliseconds.
STATUS_POLLING_INTERVAL_S = 1


@dataclass(frozen=True)
class SlurmCluster:
    """The cluster the tests submit to: a partition with a node that accepts jobs."""

    partition: str
    node: str
    cpus: int


def usable_partition(sinfo_lines: str, partition: str | None = None) -> SlurmCluster | None:
    """The partition to submit to, from ``sinfo -h -o '%P|%n|%t|%c'``; None when no node accepts jobs.

    Prefers the default partition (``sinfo`` marks it with ``*``) unless ``partition`` names one.

    >>> usable_partition("long|n1|idle|8\\ndebug*|n2|mix|4\\ndebug*|n3|drain|4\\n")
    SlurmCluster(partition='debug', node='n2', cpus=4)
    >>> usable_partition("long|n1|idle|8\\ndebug*|n2|mix|4\\n", partition="long").node
    'n1'
    >>> usable_partition("debug*|n3|down*|4\\ndebug*|n4|idle*|4\\n") is None
    True
    """
    candidates = []
    for line in sinfo_lines.splitlines():
        name, node, state, cpus = line.strip().split("|")
        if state not in ACCEPTING_STATES:
            continue
        default = name.endswith("*")
        name = name.rstrip("*")
        if partition is None or name == partition:
            candidates.append((not default, name, node, int(cpus)))
    if not candidates:
        return None
    _, name, node, cpus = min(candidates)
    return SlurmCluster(partition=name, node=node, cpus=cpus)


def _answer(command: list[str]) -> str | None:
    """Standard output of a Slurm command, or None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def running_cluster() -> SlurmCluster | None:
    """The cluster ``sinfo`` answers for, or None when Slurm is missing, down or has no usable node."""
    # With the controller down, sinfo retries for about 9 s before it fails; scontrol ping says so at once.
    if "is UP" not in (_answer(["scontrol", "ping"]) or ""):
        return None
    sinfo = _answer(["sinfo", "-h", "-o", "%P|%n|%t|%c"])
    if sinfo is None:
        return None
    return usable_partition(sinfo, os.environ.get(PARTITION_VARIABLE) or None)


def _run_script(name: str) -> None:
    script = SCRIPTS / name
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed with exit status {done.returncode}:\n"
                           f"{done.stdout[-3000:]}{done.stderr[-3000:]}")


def start_cluster() -> SlurmCluster:
    """Start the single-host cluster with ``scripts/slurm/start.sh``; raises with its output if it fails."""
    _run_script("start.sh")
    cluster = running_cluster()
    if cluster is None:
        raise RuntimeError(f"{SCRIPTS / 'start.sh'} succeeded but `sinfo` shows no idle node")
    return cluster


def stop_cluster() -> None:
    """Stop what ``start.sh`` started (``scripts/slurm/stop.sh``)."""
    _run_script("stop.sh")


def provide_cluster(environ=os.environ):
    """Yield the cluster to test on, as the module docstring orders; stop it afterwards if started here.

    Yields None when there is no cluster and the tests may not start one: the caller skips.
    """
    cluster = running_cluster()
    if cluster is not None:
        yield cluster
        return
    if environ.get(ENABLE_VARIABLE) != "1":
        yield None
        return
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster()


class QuicklyPolledSlurmProvider(SlurmProvider):
    """Parsl's SlurmProvider with a status poll every STATUS_POLLING_INTERVAL_S instead of 60 s."""

    status_polling_interval = STATUS_POLLING_INTERVAL_S


def slurm_provider(cluster: SlurmCluster, **options):
    """A SlurmProvider for one single-node block on ``cluster``, sized for a test; ``options`` override.

    The block shares its node (``exclusive=False``) and may run ten minutes. Its job runs this
    test's Python: ``worker_init`` puts the interpreter's folder first on PATH, so the job finds
    the same ``process_worker_pool.py`` even where sbatch does not pass the environment on, and
    the repository first on PYTHONPATH, so that workers import the apps of test modules by the
    names pytest gives them (``tests.integration.test_slurm``): Parsl sends a function by
    reference to its module, and the job's workers do not inherit the test's ``sys.path``.
    """
    settings = dict(
        partition=cluster.partition,
        nodes_per_block=1,
        init_blocks=1,
        max_blocks=1,
        walltime="00:10:00",
        exclusive=False,
        launcher=SingleNodeLauncher(),
        worker_init=(f'export PATH="{os.path.dirname(sys.executable)}:$PATH"\n'
                     f'export PYTHONPATH="{REPOSITORY}${{PYTHONPATH:+:$PYTHONPATH}}"'),
    )
    settings.update(options)
    return QuicklyPolledSlurmProvider(**settings)


def queued_jobs() -> set[str]:
    """Ids of every job ``squeue`` lists, in any state (pending, running, completing)."""
    answer = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                            timeout=15, check=True)
    return set(answer.stdout.split())


def wait_for_jobs_to_leave(job_ids, timeout_s: float = 60.0) -> set[str]:
    """Wait until none of ``job_ids`` is in the queue; returns those still there after ``timeout_s``.

    A cancelled job passes through "completing" while slurmd ends its processes (``KillWait``).
    """
    job_ids = {str(job) for job in job_ids}
    deadline = time.monotonic() + timeout_s
    while (remaining := job_ids & queued_jobs()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return remaining
