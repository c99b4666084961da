"""What a task's run changes in its worker, and what is put back after it.

A task runs in its worker's own process (:mod:`scalpel_executor.runtime.worker.main`), so whatever it is
given for its run is set there and undone after it: its CPUs and thread counts, its environment,
its memory limit (:class:`TaskPlace`: in the worker's memory cgroup where it has one, else under
RLIMIT_AS), and the standard descriptors and ``sys`` streams a task may close or replace
(:class:`StandardStreams`), so the next task on the worker finds them as the worker began.
"""

from __future__ import annotations

import io
import logging
import os
import resource
import sys

from scalpel_executor.host.blas import THREAD_ENV_VARS
from scalpel_executor.host.cgroups import CGROUP_ENV, TASK_MARGIN, V1, V2, MemoryCgroup, worker_name
from scalpel_executor.host.sysfs import allowed_cpus, set_affinity

__all__ = ["MEMORY_MARGIN", "OOM_KILLED_CHILD", "RLIMIT_AS", "STANDARD_STREAMS", "StandardStreams", "TaskPlace",
           "holds_this_worker", "limit_loaded_threads", "own_cgroup"]

logger = logging.getLogger("scalpel_executor.runtime.worker.main")  # the worker's log, where these are said

#: Address space a task may use beyond its declared memory under RLIMIT_AS: what a few threads'
#: stacks and a BLAS's buffers reserve without touching (virtual size, not resident). A memory
#: cgroup's margin is resident memory: :data:`~scalpel_executor.host.cgroups.TASK_MARGIN`.
MEMORY_MARGIN = 256 * 2**20
RLIMIT_AS = "RLIMIT_AS"
OOM_KILLED_CHILD = "the kernel's OOM killer ended a process the task started, at the limit; its worker lives on"


def own_cgroup() -> MemoryCgroup | None:
    """The memory cgroup the pool named in :data:`CGROUP_ENV` for this worker (not yet checked:
    the pool moves the worker in just after starting it). Removed from the environment, so no
    program a task starts takes it for its own."""
    text = os.environ.pop(CGROUP_ENV, None)
    if not text:
        return None
    try:
        pool = MemoryCgroup.from_env(text)
        return MemoryCgroup(os.path.join(pool.path, worker_name(int(os.environ["PARSL_WORKER_RANK"]), os.getpid())),
                            pool.version)
    except (KeyError, ValueError) as error:
        logger.warning("no memory cgroup for this worker (%s); declared memory is enforced with RLIMIT_AS", error)
        return None


def holds_this_worker(cgroup: MemoryCgroup | None) -> MemoryCgroup | None:
    """``cgroup`` if this process is in it (asked once, before the first task that declares memory)."""
    if cgroup is None:
        return None
    try:
        if os.getpid() in cgroup.processes():
            return cgroup
        problem = "this worker is not in it"
    except (OSError, ValueError) as error:
        problem = str(error)
    logger.warning("cannot limit tasks' memory in %s (%s); declared memory is enforced with RLIMIT_AS",
                   cgroup.path, problem)
    return None


class TaskPlace:
    """A task's CPUs, thread count, environment and memory limit, set for its run and undone after it.

    The memory limit: in the worker's cgroup where it has one (``cgroup``), else RLIMIT_AS; either
    way the worker's own figure when the task begins (``base``: resident memory or address space)
    plus the declaration and a margin (:data:`TASK_MARGIN`, :data:`MEMORY_MARGIN`).
    """

    def __init__(self, cpus: tuple[int, ...], env: tuple[tuple[str, str], ...], memory: int = 0, task_id: int = -1,
                 cgroup: MemoryCgroup | None = None):
        self.task_id = task_id
        self.own = allowed_cpus() if cpus else None  # a one-core task runs where the worker is
        self.cpus = set(cpus) if cpus and set(cpus) != self.own else None
        self.env = dict(env)
        self.saved: dict[str, str | None] = {}
        self.memory, self.base, self.limit = memory, 0, 0
        self.cgroup, self.mechanism, self.oom_kills = cgroup, None, 0
        self.previous_limit: tuple[int, int] | None = None

    def __enter__(self) -> TaskPlace:
        if self.memory > 0 and not self._limit_cgroup():
            self._limit_address_space()
        changes = dict(self.env)
        if self.cpus is not None:
            set_affinity(self.cpus)  # unpinned where the platform has no affinity; its thread count still holds
            changes.update({name: str(len(self.cpus)) for name in THREAD_ENV_VARS})
            limit_loaded_threads(len(self.cpus))
        for name, value in changes.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value
        return self

    def _limit_cgroup(self) -> bool:
        if self.cgroup is None:
            return False
        try:
            self.base, self.oom_kills = self.cgroup.usage(), self.cgroup.oom_kills()
            self.limit = self.base + int(self.memory) + TASK_MARGIN
            self.cgroup.set_limit(self.limit)
        except (OSError, ValueError) as error:
            logger.warning("could not limit task %d's memory in %s (%s); RLIMIT_AS enforces it instead",
                           self.task_id, self.cgroup.path, error)
            return False
        self.mechanism = self.cgroup.version
        return True

    def _limit_address_space(self) -> None:
        with open("/proc/self/statm") as statm:
            self.base = int(statm.read().split()[0]) * resource.getpagesize()
        self.previous_limit = resource.getrlimit(resource.RLIMIT_AS)
        hard = self.previous_limit[1]
        self.limit = self.base + int(self.memory) + MEMORY_MARGIN
        if hard != resource.RLIM_INFINITY:
            self.limit = min(self.limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (self.limit, hard))
        self.mechanism = RLIMIT_AS

    def exceeded(self, what: str) -> MemoryError:
        """The MemoryExceeded this task's limit gives, saying ``what`` happened."""
        from scalpel_executor.runtime.errors import MemoryExceeded

        return MemoryExceeded.of(self.task_id, self.memory, self.limit, self.base, self.mechanism, what)

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended a process of the worker's cgroup during the task:
        a program the task started (the worker itself would not be here to ask)."""
        if self.mechanism not in (V1, V2):
            return False
        try:
            return self.cgroup.oom_kills() > self.oom_kills
        except (OSError, ValueError):
            return False

    def __exit__(self, *exc) -> None:
        if self.mechanism in (V1, V2):
            try:
                self.cgroup.set_limit(None)
            except OSError:  # the next task's limit replaces it
                logger.exception("could not lift task %d's memory limit in %s", self.task_id, self.cgroup.path)
        if self.previous_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, self.previous_limit)
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.cpus is not None:
            set_affinity(self.own)
            limit_loaded_threads(len(self.own))  # a BLAS the task loaded started with its thread count


#: The standard descriptors a task may close or redirect, the ``sys`` streams over them, and how each
#: is reopened: (name in ``sys``, descriptor, binary mode).
STANDARD_STREAMS = (("stdin", 0, "rb"), ("stdout", 1, "wb"), ("stderr", 2, "wb"))


class StandardStreams:
    """The worker's standard descriptors and ``sys`` streams as it began serving, put back after a
    task that closed or replaced them.

    A task runs in the worker's own process, so ``os.close(2)`` there, a ``dup2`` onto 1,
    ``sys.stdout = open(...)`` or ``sys.stderr.close()`` would otherwise outlast it: every later task
    on the worker that prints would fail with EBADF or "I/O operation on closed file".
    """

    def __init__(self):
        self.copies: dict[int, tuple[int, tuple[int, int]]] = {}  # descriptor -> (its copy, (st_dev, st_ino))
        for _, fd, _ in STANDARD_STREAMS:
            try:
                copy = os.dup(fd)  # not inheritable (PEP 446): no program a task starts holds it
            except OSError:
                continue  # started without it: nothing to put back
            self.copies[fd] = (copy, _identity(copy))
        self.streams = {name: getattr(sys, name) for name, _, _ in STANDARD_STREAMS}

    def restore(self) -> None:
        """Put back what the task changed. When nothing changed it costs one fstat per descriptor:
        8-10 µs a task in all (timeit, Python 3.11 on a shared 2-core host at load
        average 2.7, where one fstat took 1.2-1.8 µs and the streams' checks 0.4 µs), against a no-op
        task's round trip of 3-4 ms on the same host (docs/notebook.md, "The node manager")."""
        for fd, (copy, identity) in self.copies.items():
            if _names(fd, identity):
                continue
            if _names(copy, identity):  # a task that closes every descriptor (os.closerange) takes the copy too
                os.dup2(copy, fd)  # inheritable, as a standard descriptor is
            else:
                logger.warning("a task closed or redirected standard descriptor %d and also closed its copy, "
                               "descriptor %d; it stays as the task left it", fd, copy)
        for name, fd, mode in STANDARD_STREAMS:
            stream = self.streams[name]
            if stream is None:
                continue  # the worker had none
            if stream.closed:
                unbuffered = mode == "wb" and stream.write_through  # python -u, PYTHONUNBUFFERED
                reopened = io.TextIOWrapper(open(fd, mode, buffering=0 if unbuffered else -1, closefd=False),
                                            encoding=stream.encoding, errors=stream.errors,
                                            line_buffering=stream.line_buffering, write_through=stream.write_through)
                if getattr(sys, f"__{name}__") is stream:
                    setattr(sys, f"__{name}__", reopened)
                stream = self.streams[name] = reopened
            if getattr(sys, name) is not stream:
                setattr(sys, name, stream)


def _identity(fd: int) -> tuple[int, int]:
    """Which file ``fd`` names: (device, inode); OSError when it is closed."""
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino


def _names(fd: int, identity: tuple[int, int]) -> bool:
    """Whether ``fd`` is open on the file whose (device, inode) is ``identity``."""
    try:
        return _identity(fd) == identity
    except OSError:
        return False


def limit_loaded_threads(threads: int) -> None:
    """Resize the thread pools of the BLAS and OpenMP libraries this process has loaded."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    except Exception:  # noqa: BLE001 - the task runs with the libraries' own counts
        logger.exception("could not set the task's thread count to %d", threads)
