"""Memory cgroups: where a node's workers can be given a limit on the memory they hold.

``enforce_memory=True`` limits what a task may hold while it runs. A memory cgroup limits resident
memory (what the task touches), where RLIMIT_AS limits address space (what it maps: a JIT runtime,
CUDA or a BLAS maps gigabytes it never touches and fails under it). So the pool looks for one at
start (:func:`find_memory_cgroup`) and falls back to RLIMIT_AS only where none is usable::

    the pool's process                                            (cgroup v2, else v1)
      find_memory_cgroup() ── the process's own memory cgroup, writable ──> MemoryCgroup P
      P.child(pool_name(pid, pool id)).delegate()                          (no process of its own)
        .child(worker_name(slot, pid)) per worker, the worker moved in at once (add)
      worker, around a task that declares memory:  limit = usage() + declaration + margin,
                                                   set_limit(None) after it
      a worker killed by the kernel's OOM killer:  oom_kills() rose ──> the task failed past its limit
      a worker replaced, the pool shut down:       remove() (rmdir, once its processes are gone)
      a pool that died without shutting down:      its cgroups removed when the next pool starts
                                                   there (remove_stale_pools)

*cgroup v2* (the unified hierarchy, ``0::/path`` in ``/proc/self/cgroup``): a child cgroup gets the
memory controller only if its parent lists it in ``cgroup.subtree_control``, which the kernel
refuses (EBUSY) for a cgroup holding processes other than the root; the driver's own process is
never moved to make room, so v2 is used where the process's cgroup already delegates memory to its
children or can (the root cgroup). *cgroup v1*: the memory hierarchy's own cgroup
(``N:memory:/path``), usable where a child can be made in it. Every path is a parameter, so tests
point them at a fake tree. Each reason a hierarchy is not usable is one sentence, which the pool logs.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

__all__ = ["V1", "V2", "CGROUP_ENV", "TASK_MARGIN", "MemoryCgroup", "find_memory_cgroup", "pool_name", "worker_name"]

V1, V2 = "cgroup v1", "cgroup v2"
#: The environment variable that tells a worker its pool's cgroup (``MemoryCgroup.to_env``).
CGROUP_ENV = "SCALPEL_MEMORY_CGROUP"
#: Resident memory a task may hold beyond its declaration: what running it costs the worker besides
#: the task's own data (its unpickled arguments, its result's serialization, a first import of its
#: module). The limit is the worker's usage when the task begins, plus the declaration, plus this.
TASK_MARGIN = 64 * 2**20
#: v1 reports "no limit" as the largest page-counter value (LONG_MAX rounded down to a page); any
#: value this large is no limit.
_V1_UNLIMITED = 2**62


POOL_PREFIX = "scalpel-"


def pool_name(pid: int, pool_id: str) -> str:
    """The name of a pool's cgroup: the pid of its process (so a dead pool's is known) and its id
    (so two pools of one process never share one)."""
    return f"{POOL_PREFIX}{pid}-{pool_id}"


def worker_name(slot: int, pid: int) -> str:
    """The name of a worker's cgroup under its pool's: one place for the pool that makes it and the
    worker that finds it."""
    return f"worker-{slot}-{pid}"


@dataclass(frozen=True)
class MemoryCgroup:
    """One memory cgroup directory: its usage, its limit, its OOM kills, its children.

    ``version`` is :data:`V1` or :data:`V2`; the file names differ, the meaning does not.
    """

    path: str
    version: str

    def _read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as file:
            return file.read()

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w") as file:
            file.write(text)

    def usage(self) -> int:
        """Bytes charged to the cgroup now (its processes' memory and the page cache they caused)."""
        return int(self._read("memory.current" if self.version == V2 else "memory.usage_in_bytes"))

    def limit(self) -> int | None:
        """The limit in bytes; None: none."""
        if self.version == V2:
            text = self._read("memory.max").strip()
            return None if text == "max" else int(text)
        value = int(self._read("memory.limit_in_bytes"))
        return None if value >= _V1_UNLIMITED else value

    def set_limit(self, limit: int | None) -> None:
        """Limit the cgroup to ``limit`` bytes of memory and no swap (None: no limit, swap as the
        host allows). Past it the kernel reclaims what it can, then its OOM killer ends a process of
        the cgroup; without the swap limit it would swap the task out instead of stopping it."""
        value = "max" if limit is None else str(int(limit))
        if self.version == V2:
            self._write("memory.max", value)
            self._write_if_present("memory.swap.max", "max" if limit is None else "0")
            return
        # v1 limits memory + swap (memsw) apart, memsw never below memory: lift memsw, then set both.
        self._write_if_present("memory.memsw.limit_in_bytes", "-1")
        self._write("memory.limit_in_bytes", "-1" if limit is None else value)
        if limit is not None:
            self._write_if_present("memory.memsw.limit_in_bytes", value)

    def _write_if_present(self, name: str, text: str) -> None:
        """Write a file the kernel offers only with swap accounting on."""
        if os.path.exists(os.path.join(self.path, name)):
            self._write(name, text)

    def oom_kills(self) -> int:
        """How many processes of the cgroup the kernel's OOM killer has ended (v2 ``memory.events``,
        v1 ``memory.oom_control`` on kernels from 4.13). An older v1 kernel does not count them:
        there this is ``memory.failcnt``, the times usage reached the limit, which rises on any
        reclaim at the limit; a worker that died by SIGKILL while it rose is taken as OOM-killed."""
        if self.version == V2:
            return _field(self._read("memory.events"), "oom_kill") or 0
        kills = _field(self._read("memory.oom_control"), "oom_kill")
        return kills if kills is not None else int(self._read("memory.failcnt"))

    def processes(self) -> list[int]:
        return [int(line) for line in self._read("cgroup.procs").split()]

    def add(self, pid: int) -> None:
        """Move process ``pid`` into this cgroup: what it allocates from now on is charged here."""
        self._write("cgroup.procs", str(pid))

    def child(self, name: str) -> MemoryCgroup:
        """Make (or reuse) the child cgroup ``name``; in v2 its OOM kill takes its whole group (a
        worker with its probe's sampler and a bash_app's programs)."""
        child = MemoryCgroup(os.path.join(self.path, name), self.version)
        os.makedirs(child.path, exist_ok=True)
        if self.version == V2:
            try:
                child._write("memory.oom.group", "1")
            except FileNotFoundError:  # kernels before 4.19 kill one process, as v1 does
                pass
        return child

    def delegate(self) -> None:
        """Give this cgroup's children the memory controller (v2; in v1 they have it). Only for a
        cgroup that holds no process, such as a pool's: a v2 cgroup that gives its children a
        controller takes no process of its own."""
        if self.version == V2:
            _enable_memory(self.path)

    def remove(self) -> bool:
        """Remove this cgroup and its children once they hold no process; False: some still do
        (a process not yet reaped), try again later."""
        try:
            children = sorted(entry.path for entry in os.scandir(self.path) if entry.is_dir())
        except FileNotFoundError:
            return True
        removed = all([MemoryCgroup(path, self.version).remove() for path in children])
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            return True
        except OSError as error:
            if error.errno in (errno.EBUSY, errno.ENOTEMPTY):
                return False
            raise
        return removed

    def remove_stale_pools(self) -> None:
        """Remove the cgroups of pools whose process is gone (killed before its shutdown), once empty."""
        for entry in os.scandir(self.path):
            pid = entry.name[len(POOL_PREFIX):].partition("-")[0]
            if entry.is_dir() and entry.name.startswith(POOL_PREFIX) and pid.isdigit() and not _alive(int(pid)):
                try:
                    MemoryCgroup(entry.path, self.version).remove()
                except OSError:  # not ours to remove after all (another user's): leave it
                    pass

    def to_env(self) -> str:
        return f"{self.version}:{self.path}"

    @classmethod
    def from_env(cls, text: str) -> MemoryCgroup:
        """The cgroup ``to_env`` wrote; ValueError for anything else."""
        version, _, path = text.partition(":")
        if version not in (V1, V2) or not os.path.isabs(path):
            raise ValueError(f"{CGROUP_ENV} must read '{V1}:/path' or '{V2}:/path', got {text!r}")
        return cls(path, version)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _field(text: str, name: str) -> int | None:
    """The number after ``name`` in a flat-keyed cgroup file (``oom_kill 3``)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return None


def _enable_memory(path: str) -> None:
    """Give ``path``'s children the memory controller (v2 ``cgroup.subtree_control``)."""
    with open(os.path.join(path, "cgroup.subtree_control")) as file:
        if "memory" in file.read().split():
            return
    with open(os.path.join(path, "cgroup.subtree_control"), "w") as file:
        file.write("+memory")


def _mounts(mounts: str) -> tuple[str | None, str | None]:
    """The cgroup2 mount point and the cgroup v1 memory hierarchy's, from ``/proc/self/mounts``."""
    unified = memory = None
    with open(mounts) as file:
        for line in file:
            fields = line.split()
            if len(fields) < 4:
                continue
            kind, where, options = fields[2], fields[1], fields[3].split(",")
            if kind == "cgroup2" and unified is None:
                unified = where
            elif kind == "cgroup" and "memory" in options and memory is None:
                memory = where
    return unified, memory


def _membership(membership: str) -> tuple[str | None, str | None]:
    """This process's v2 cgroup (``0::/path``) and v1 memory cgroup (``N:memory:/path``)."""
    unified = memory = None
    with open(membership) as file:
        for line in file:
            number, _, rest = line.rstrip("\n").partition(":")
            controllers, _, path = rest.partition(":")
            if number == "0" and controllers == "":
                unified = path
            elif "memory" in controllers.split(","):
                memory = path
    return unified, memory


def _usable_v2(root: str, relative: str) -> tuple[MemoryCgroup | None, str]:
    path = os.path.normpath(os.path.join(root, relative.lstrip("/")))
    try:
        with open(os.path.join(path, "cgroup.controllers")) as file:
            available = file.read().split()
    except OSError as error:
        return None, f"{V2}: cannot read {path}/cgroup.controllers ({error.strerror})"
    if "memory" not in available:
        return None, (f"{V2}: the memory controller is not available in {path} (controllers: "
                      f"{' '.join(available) or 'none'}; bound to cgroup v1, or not delegated to this cgroup)")
    try:
        _enable_memory(path)
    except OSError as error:
        why = ("it holds processes (this one among them), and the kernel gives a v2 cgroup's children a controller "
               "only while it holds none; the executor does not move its own process out"
               if error.errno == errno.EBUSY else error.strerror)
        return None, f"{V2}: cannot give {path}'s children the memory controller: {why}"
    return MemoryCgroup(path, V2), f"{V2} at {path}"


def _usable_v1(root: str, relative: str) -> tuple[MemoryCgroup | None, str]:
    path = os.path.normpath(os.path.join(root, relative.lstrip("/")))
    if not os.path.exists(os.path.join(path, "memory.limit_in_bytes")):
        return None, f"{V1}: {path} is not a memory cgroup (no memory.limit_in_bytes)"
    if not os.access(path, os.W_OK):
        return None, f"{V1}: {path} is not writable by this user (uid {os.getuid()})"
    return MemoryCgroup(path, V1), f"{V1} at {path}"


def find_memory_cgroup(mounts: str = "/proc/self/mounts", membership: str = "/proc/self/cgroup", *,
                       unified_root: str | None = None, memory_root: str | None = None
                       ) -> tuple[MemoryCgroup | None, list[str]]:
    """This process's memory cgroup in which workers' cgroups can be made: v2 where usable, else v1.

    Parameters
    ----------
    mounts, membership : str
        ``/proc/self/mounts`` and ``/proc/self/cgroup``, or files shaped like them.
    unified_root, memory_root : str, optional
        Where the cgroup2 hierarchy and the v1 memory hierarchy are mounted; default as ``mounts``
        says (a fake tree's directories, in tests).

    Returns
    -------
    The cgroup (None: none usable, enforce with RLIMIT_AS) and one sentence per hierarchy tried:
    where it is, or why it is not usable.

    Giving the children of a v2 cgroup the memory controller (``+memory`` in its
    ``cgroup.subtree_control``) is the one change made outside the pool's own cgroups.
    """
    try:
        found_unified, found_memory = _mounts(mounts)
        in_unified, in_memory = _membership(membership)
    except OSError as error:
        return None, [f"cannot read the cgroup mounts ({error})"]
    unified_root = unified_root or found_unified
    memory_root = memory_root or found_memory
    # Each hierarchy in turn, v2 first: why it is not there, or where it is and how to try it.
    tried = [
        (f"{V2}: not mounted" if unified_root is None else
         f"{V2}: this process is in no v2 cgroup ({membership} has no 0::/path line)" if in_unified is None else
         None, _usable_v2, unified_root, in_unified),
        (f"{V1}: no memory hierarchy is mounted" if memory_root is None or in_memory is None else None,
         _usable_v1, memory_root, in_memory),
    ]
    reasons = []
    for absent, usable, root, relative in tried:
        if absent is not None:
            reasons.append(absent)
            continue
        cgroup, reason = usable(root, relative)
        reasons.append(reason)
        if cgroup is not None:
            return cgroup, reasons
    return None, reasons
