"""Worker processes from the outside: which CPUs each gets, how one starts, how one ends.

A worker is ``python -m scalpel_executor.runtime.worker.main FD --cpus C --parent PID`` with its end
of a socket pair as FD, in a session of its own (so a Ctrl-C reaches the driver, which shuts
workers down, and killing the process group takes a ``bash_app``'s children with it), with the
BLAS/OpenMP thread caps of its CPU count. The pool and :class:`WorkerClient` (one worker driven
directly, for benchmarks and tests) both start workers here.

Where the platform cannot pin (macOS: :func:`~scalpel_executor.host.sysfs.affinity_available`),
slots keep their CPUs (a task's thread count and the run report still read them) but nothing is
pinned, and :func:`slot_cpus` says so once per process.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection

from scalpel_executor.core.domains import Topology
from scalpel_executor.host.blas import THREAD_ENV_VARS
from scalpel_executor.host.sysfs import AFFINITY_UNAVAILABLE, affinity_available, allowed_cpus
from scalpel_executor.runtime.wire.worker_messages import Measured, Ready, Run, Stop, Warm, decode, encode

__all__ = ["slot_cpus", "worker_environment", "start_worker", "kill_group", "WorkerClient"]

logger = logging.getLogger(__name__)
_said_unpinned = False  # AFFINITY_UNAVAILABLE is logged once per process


def slot_cpus(topology: Topology, pin: str, real_cpus: Sequence[int]) -> list[tuple[int, ...]]:
    """The real CPUs each slot's worker is pinned to.

    On a real topology, slot i is CPU i of the topology (``pin="core"``) or every CPU of its domain
    (``pin="domain"``). A topology that names CPUs this process cannot use (a spec such as
    ``"2x4"`` describing a machine we do not have) is laid over the real CPUs round-robin, so its
    decisions can be exercised here. Where the platform cannot pin, the first call logs
    :data:`~scalpel_executor.host.sysfs.AFFINITY_UNAVAILABLE` (a warning, once per process).
    """
    global _said_unpinned
    if not _said_unpinned and not affinity_available():
        _said_unpinned = True
        logger.warning(AFFINITY_UNAVAILABLE)
    allowed = set(real_cpus)
    if set(topology.cpus) <= allowed:
        if pin == "domain":
            return [tuple(topology.domain_of(cpu).cpus) for cpu in topology.cpus]
        return [(cpu,) for cpu in topology.cpus]
    ordered = sorted(allowed)
    return [(ordered[i % len(ordered)],) for i in range(len(topology.cpus))]


def worker_environment(cpus: Sequence[int], extra: Mapping[str, str] | None = None,
                       base: Mapping[str, str] | None = None, *, rank: int | None = None,
                       count: int | None = None) -> dict[str, str]:
    """A worker's environment: ``base`` (default this process's), BLAS/OpenMP threads = its CPU count,
    ``extra``, then HTEX's ``PARSL_WORKER_RANK`` (``rank``: the worker's index on its node, which its
    replacement keeps) and ``PARSL_WORKER_COUNT`` (``count``: the workers on the node), set last
    as HTEX's worker sets them over whatever it inherited."""
    env = dict(os.environ if base is None else base)
    for name in THREAD_ENV_VARS:
        env[name] = str(len(cpus))
    env.update(extra or {})
    if rank is not None:
        env["PARSL_WORKER_RANK"] = str(rank)
    if count is not None:
        env["PARSL_WORKER_COUNT"] = str(count)
    env["SCALPEL_SYS_PATH"] = os.pathsep.join(p for p in sys.path if p)  # the driver's imports, for the task
    return env


#: ``subprocess.Popen``'s arguments that start a worker or node manager in a process group of its
#: own within the caller's session, as Parsl starts HTEX's: a SIGKILL to the group ends it with the
#: children a task left, and a terminal's Ctrl-C, sent to the foreground group, does not reach it.
#: Not a session of its own: where the kernel shares CPU time among sessions (``sched_autogroup``,
#: processes in no cgroup of their own), each worker would draw a share of its own against the other
#: processes of a shared node (two busy processes beside a load of two took 5.4 CPU-seconds of 8 in
#: sessions of their own, 4.0 in a group of the caller's session, docs/benchmarks.md).
OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


def start_worker(cpus: Sequence[int], env: Mapping[str, str], *, probe: bool | None = None
                 ) -> tuple[subprocess.Popen, Connection]:
    """Start one worker pinned to ``cpus``; returns its process and this side's connection.

    ``probe`` None leaves the choice to the worker's environment (``SCALPEL_PROBE``).
    """
    ours, theirs = socket.socketpair()
    command = [sys.executable, "-m", "scalpel_executor.runtime.worker.main", str(theirs.fileno()),
               "--cpus", ",".join(map(str, cpus)), "--parent", str(os.getpid())]
    if probe is not None:
        command += ["--probe", "on" if probe else "off"]
    try:
        process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), env=dict(env), **OWN_GROUP,
                                   stdin=subprocess.DEVNULL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, Connection(ours.detach())


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a worker's process group: the worker and any ``bash_app`` children it left."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class WorkerClient:
    """One worker process driven directly, without a worker pool (benchmarks and tests).

    Started by :func:`start_worker`, as the pool starts its workers.

    Parameters
    ----------
    cpus : sequence of int
        CPUs to pin the worker to; default the first CPU this process may use.
    probe : bool
        Start the worker with ``--probe on`` or ``--probe off``.
    env : dict, optional
        The worker's environment; default this process's.

    Example
    -------
    >>> with WorkerClient() as worker:
    ...     ok, value, stats = worker.run(pow, 2, 10)
    >>> ok, value, sorted(k for k in ("wall", "cpu", "footprint") if k in stats)
    (True, 1024, ['cpu', 'footprint', 'wall'])
    """

    def __init__(self, cpus=None, probe: bool = True, env: dict[str, str] | None = None):
        cpus = tuple(cpus) if cpus is not None else (min(allowed_cpus()),)
        self.process, self.connection = start_worker(cpus, dict(os.environ if env is None else env), probe=probe)
        self._next_id = 0
        for expected in (Ready, Warm):
            message = decode(self.connection.recv_bytes()) if self.connection.poll(60) else None
            if not isinstance(message, expected):
                self.close()
                raise RuntimeError(f"worker pid {self.process.pid} did not report {expected.__name__.lower()} within 60 s")

    def run(self, func, *args, **kwargs):
        """Run ``func(*args, **kwargs)`` in the worker; returns ``(ok, result or RemoteExceptionWrapper, stats)``."""
        from parsl.serialize import deserialize, pack_apply_message

        self._next_id += 1
        self.connection.send_bytes(encode(Run(self._next_id, pack_apply_message(func, args, kwargs))))
        result = self.receive()
        return result.ok, deserialize(result.payload), result.stats

    def receive(self):
        """The worker's next answer but a ``Measured`` reading (sent while a measured task runs;
        its WorkerResult follows)."""
        while True:
            message = decode(self.connection.recv_bytes())
            if not isinstance(message, Measured):
                return message

    def close(self) -> None:
        """Ask the worker to stop and wait for it (killing it after 10 s). Idempotent."""
        if self.process.poll() is None:
            try:
                self.connection.send_bytes(encode(Stop()))
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                kill_group(self.process)
                self.process.wait()
        self.connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
