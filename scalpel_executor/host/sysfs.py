"""The machine's LLC domains as Linux sysfs reports them: where hardware facts enter the program.

Reads ``{sysfs_root}/devices/system/cpu`` through a root path that tests replace with a fake tree
(the way sched_ext's ``scx_utils`` topology does) and the process's CPU affinity, and returns the
pure :class:`~scalpel_executor.core.domains.Topology` model.

CPU affinity is read and set here and nowhere else (:func:`allowed_cpus`, :func:`set_affinity`,
and per thread :func:`thread_cpus`, :func:`set_thread_cpus`): :func:`affinity_available` is the one
place that says whether the platform has it, :func:`thread_affinity_available` whether it has it per
thread (Linux only). While the driver's threads are confined to one CPU (``pin_driver=``,
:mod:`~scalpel_executor.runtime.driver.driver_pin`), :func:`allowed_cpus` and topology detection
answer with the CPUs the process had before (:func:`keep_process_cpus`), not the one CPU of the
thread that asks. Linux has
``os.sched_setaffinity``; Windows and FreeBSD have psutil's ``Process.cpu_affinity``; macOS has
neither, and there a process may use every CPU and :func:`set_affinity` pins nothing.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from scalpel_executor.core.cpulist import cpu_set, format_cpu_list, parse_cpu_list
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size, parse_size

__all__ = ["detect_topology", "resolve_topology", "allowed_cpus", "affinity_available", "set_affinity",
           "thread_affinity_available", "thread_cpus", "set_thread_cpus", "thread_cpu_seconds",
           "keep_process_cpus", "AFFINITY_UNAVAILABLE"]

logger = logging.getLogger("scalpel_executor.core.domains")

_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
#: What is said, once per process, where workers cannot be pinned (runtime.node.processes.slot_cpus).
AFFINITY_UNAVAILABLE = "CPU affinity is not available on this platform; workers run unpinned"
#: The CPUs this process had before its driver's threads were confined to one (None: they are not);
#: ``os.sched_getaffinity(0)`` answers for the calling thread, which may be one of them.
_process_cpus: frozenset[int] | None = None


def detect_topology(
    sysfs_root: str | os.PathLike = "/sys",
    *,
    allowed_cpus: Iterable[int] | None = None,
    smt: bool = False,
) -> Topology:
    """Read the LLC domains of this machine from sysfs.

    Parameters
    ----------
    sysfs_root : str or path-like
        Where sysfs is mounted; tests pass a fake tree. CPUs are the
        ``{sysfs_root}/devices/system/cpu/cpuN`` directories.
    allowed_cpus : iterable of int or str, optional
        CPUs this process may use; defaults to ``os.sched_getaffinity(0)``, which reflects
        cpusets and ``taskset``. A CPU-list string such as ``"0-3"`` is accepted too.
    smt : bool
        If False (default) keep one hardware thread per physical core: the lowest-numbered
        allowed sibling. If True keep every allowed hardware thread.

    Returns
    -------
    Topology
        Domains are the detected groups intersected with ``allowed_cpus``; groups left
        empty are dropped and the rest renumbered 0.. by lowest CPU, so domains may have
        unequal core counts.

    Raises
    ------
    ValueError
        If no online CPU is allowed; the message lists both sets.

    Notes
    -----
    The LLC is the highest cache level (ignoring instruction caches) found in
    ``cpuN/cache/index*/level``; CPUs sharing one ``shared_cpu_list`` at that level form a
    domain (source ``"sysfs:L3"`` for level 3). Without any cache information CPUs are
    grouped by ``topology/physical_package_id`` (source ``"sysfs:package"``, size unknown).
    Without any ``cpuN`` directory all allowed CPUs form one domain of unknown size (source
    ``"psutil"``); SMT siblings cannot be told apart then, so all allowed CPUs are kept.
    CPUs whose ``online`` file reads ``0`` are skipped.

    Examples
    --------
    >>> topo = detect_topology()  # doctest: +SKIP
    >>> print(topo.describe())  # doctest: +SKIP
    1 LLC domain (sysfs:L3), 2 cores
      domain 0: 2 cores, CPUs 0-1, L3 480.0 MiB
    """
    allowed = _allowed_set(allowed_cpus)
    cpu_root = Path(sysfs_root) / "devices" / "system" / "cpu"
    cpu_dirs = _cpu_dirs(cpu_root)
    if not cpu_dirs:
        return _detect_without_sysfs(allowed, cpu_root)

    online = {cpu for cpu, path in cpu_dirs.items() if _read(path / "online") != "0"}
    usable = online & allowed
    if not usable:
        raise ValueError(
            f"none of the online CPUs under {cpu_root} ({format_cpu_list(online) or 'none'}) "
            f"is available to this process (allowed: {format_cpu_list(allowed) or 'none'}); "
            f"widen the affinity with taskset or the cpuset, or pass allowed_cpus that "
            f"overlap the online CPUs"
        )

    if smt:
        kept = usable
    else:
        # One thread per physical core: siblings share L1/L2, so two tasks on them are not
        # two cores' worth of cache. Keep the lowest *usable* sibling so a cpuset that
        # excludes thread 0 of a core still gets that core.
        kept = {cpu for cpu in usable if cpu == min(_siblings(cpu_dirs[cpu], cpu) & usable)}

    caches = {cpu: _read_caches(cpu_dirs[cpu]) for cpu in kept}
    levels = {level for per_cpu in caches.values() for level in per_cpu}
    groups: dict[object, list[int]] = {}
    sizes: dict[object, set[int]] = {}
    if levels:
        llc = max(levels)
        source = f"sysfs:L{llc}"
        for cpu in sorted(kept):
            entry = caches[cpu].get(llc)
            if entry is None:
                # Keep the CPU rather than lose a core; its package is the best guess.
                package = _read(cpu_dirs[cpu] / "topology" / "physical_package_id")
                logger.warning(
                    "CPU %d has no L%d cache entry under %s; grouping it by package %s",
                    cpu, llc, cpu_dirs[cpu] / "cache", package,
                )
                key: object = ("package", package)
            else:
                shared, size = entry
                # Key on the CPU's own view so the result is a partition even if sysfs
                # reports inconsistent sharing lists for CPUs of one cache.
                key = ("llc", frozenset((shared & online) | {cpu}))
                if size is not None:
                    sizes.setdefault(key, set()).add(size)
            groups.setdefault(key, []).append(cpu)
    else:
        source = "sysfs:package"
        logger.info(
            "no cache information under %s; treating each CPU package as one LLC domain "
            "of unknown size", cpu_root,
        )
        for cpu in sorted(kept):
            package = _read(cpu_dirs[cpu] / "topology" / "physical_package_id")
            groups.setdefault(("package", package), []).append(cpu)

    result_groups = []
    for key, cpus in groups.items():
        found = sizes.get(key, set())
        if len(found) > 1:
            logger.warning(
                "CPUs %s share one LLC but report sizes %s; using the smallest",
                format_cpu_list(cpus), ", ".join(format_size(s) for s in sorted(found)),
            )
        result_groups.append((cpus, min(found) if found else None))
    topology = Topology._from_groups(result_groups, source)
    logger.debug("detected topology from %s: %s", cpu_root, topology.to_dict())
    return topology

def _detect_without_sysfs(allowed: set[int], cpu_root: Path) -> Topology:
    if not allowed:
        raise ValueError(
            f"no CPU directories under {cpu_root} and no CPUs are allowed "
            f"(allowed_cpus is empty); pass the CPUs to use as allowed_cpus"
        )
    logger.warning(
        "no CPU directories under %s; treating the %d allowed CPUs (%s) as one LLC domain "
        "of unknown size, SMT siblings included", cpu_root, len(allowed),
        format_cpu_list(allowed),
    )
    return Topology._from_groups([(allowed, None)], "psutil")


def resolve_topology(
    override: Topology | str | Sequence[Sequence[int]] | None = None,
    *,
    sysfs_root: str | os.PathLike = "/sys",
    allowed_cpus: Iterable[int] | None = None,
    smt: bool = False,
) -> Topology:
    """Turn a user's topology setting into a :class:`Topology`.

    Parameters
    ----------
    override : Topology, str, sequence of CPU lists or None
        None detects the machine (:func:`detect_topology` with ``sysfs_root``, ``allowed_cpus``
        and ``smt``); a Topology is returned as is; a string is a spec for
        :meth:`Topology.from_spec`; a sequence of CPU lists goes to :meth:`Topology.from_cpu_lists` with
        ``allowed_cpus``.

    Raises
    ------
    TypeError
        For any other kind of value.

    Examples
    --------
    >>> resolve_topology("2x4").processors
    2
    """
    if override is None:
        return detect_topology(sysfs_root, allowed_cpus=allowed_cpus, smt=smt)
    if isinstance(override, Topology):
        return override
    if isinstance(override, str):
        return Topology.from_spec(override)
    if isinstance(override, Iterable) and not isinstance(override, (bytes, Mapping)):
        return Topology.from_cpu_lists(override, allowed_cpus=_allowed_set(allowed_cpus))  # type: ignore[arg-type]
    raise TypeError(
        f"topology must be None (detect), a Topology, a spec string such as '2x4:12MiB' or "
        f"a list of CPU lists such as [[0, 1], [2, 3]]; got {type(override).__name__} "
        f"{override!r}"
    )


def allowed_cpus() -> set[int]:
    """The CPUs this process may use (``os.sched_getaffinity(0)``: cpusets and ``taskset``); every
    CPU where the platform has no affinity (macOS)."""
    return _allowed_set(None)


def affinity_available() -> bool:
    """Whether this platform can pin a process to CPUs: ``os.sched_setaffinity`` (Linux) or psutil's
    ``Process.cpu_affinity`` (Windows, FreeBSD); not on macOS."""
    return _affinity_setter() is not None


def set_affinity(cpus: Iterable[int], pid: int = 0) -> bool:
    """Pin process ``pid`` (0: this one) to ``cpus``; returns False, pinning nothing, where
    :func:`affinity_available` is False. OSError (a CPU this process may not use) goes to the caller."""
    setter = _affinity_setter()
    if setter is None:
        return False
    setter(pid, set(cpus))
    return True


def thread_affinity_available() -> bool:
    """Whether this platform can pin one thread of a process to CPUs (``os.sched_setaffinity`` with a
    thread id: Linux)."""
    return hasattr(os, "sched_setaffinity")


def thread_cpus(thread_id: int) -> set[int]:
    """The CPUs thread ``thread_id`` (a ``threading.Thread.native_id``) may run on (Linux).
    OSError where the thread has ended."""
    return set(os.sched_getaffinity(thread_id))


def set_thread_cpus(thread_id: int, cpus: Iterable[int]) -> None:
    """Pin thread ``thread_id`` of this process to ``cpus`` (Linux); the threads it starts later
    inherit them. OSError where the thread has ended or a CPU is not this process's."""
    os.sched_setaffinity(thread_id, set(cpus))


def thread_cpu_seconds(thread_id: int) -> float:
    """The CPU seconds thread ``thread_id`` of this process has run (Linux): its ``schedstat``'s
    nanoseconds on a CPU, else its ``stat``'s user and system clock ticks. OSError where the
    thread has ended."""
    try:
        with open(f"/proc/self/task/{thread_id}/schedstat", "rb") as schedstat:
            return int(schedstat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):  # a kernel without schedstats
        with open(f"/proc/self/task/{thread_id}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def keep_process_cpus(cpus: Iterable[int] | None) -> None:
    """Until called again with None, :func:`allowed_cpus` and topology detection answer ``cpus``: the
    process's CPUs while some of its threads (the one that asks, maybe) are confined to fewer."""
    global _process_cpus
    _process_cpus = None if cpus is None else frozenset(cpus)


def _affinity_setter():
    """How this platform sets a process's affinity, ``setter(pid, cpus)``, or None: the one place that
    says whether affinity exists."""
    if hasattr(os, "sched_setaffinity"):
        return os.sched_setaffinity
    import psutil  # only off Linux: the worker's start imports nothing it does not need

    if hasattr(psutil.Process, "cpu_affinity"):
        return lambda pid, cpus: psutil.Process(pid or None).cpu_affinity(sorted(cpus))
    return None


def _allowed_set(allowed_cpus: Iterable[int] | str | None) -> set[int]:
    """The CPUs this process may use: ``allowed_cpus`` validated, or the affinity mask."""
    if allowed_cpus is None:
        if _process_cpus is not None:
            return set(_process_cpus)
        if hasattr(os, "sched_getaffinity"):
            return set(os.sched_getaffinity(0))
        # Not Linux: psutil knows the affinity on Windows and FreeBSD; without any (macOS), every CPU.
        import psutil

        try:
            return set(psutil.Process().cpu_affinity())
        except (AttributeError, psutil.Error, OSError):
            return set(range(psutil.cpu_count() or os.cpu_count() or 1))
    if isinstance(allowed_cpus, str):
        return cpu_set(allowed_cpus)
    return cpu_set(allowed_cpus)


def _read(path: Path) -> str | None:
    """Stripped text of a sysfs file, or None if it is missing or unreadable."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cpu_dirs(cpu_root: Path) -> dict[int, Path]:
    """``{cpu id: directory}`` for the ``cpuN`` entries, skipping cpufreq, cpuidle and so on."""
    try:
        entries = list(cpu_root.iterdir())
    except OSError:
        return {}
    dirs = {}
    for entry in entries:
        match = _CPU_DIR.match(entry.name)
        if match and entry.is_dir():
            dirs[int(match.group(1))] = entry
    return dirs


def _parse_cpu_mask(text: str) -> set[int]:
    """Parse a hex mask such as ``"00000000,0000ff0f"`` (``shared_cpu_map`` format)."""
    value = int(text.replace(",", ""), 16)
    return {bit for bit in range(value.bit_length()) if value >> bit & 1}


def _siblings(cpu_dir: Path, cpu: int) -> set[int]:
    """Hardware threads on the same physical core as ``cpu``, including it."""
    # core_cpus_list is the newer name (Linux 5.7+); thread_siblings_list the older one.
    for name in ("core_cpus_list", "thread_siblings_list"):
        text = _read(cpu_dir / "topology" / name)
        if text is None:
            continue
        try:
            return set(parse_cpu_list(text)) | {cpu}
        except ValueError as error:
            logger.warning("ignoring %s: %s", cpu_dir / "topology" / name, error)
    return {cpu}


def _read_caches(cpu_dir: Path) -> dict[int, tuple[set[int], int | None]]:
    """``{level: (CPUs sharing it, size in bytes or None)}`` for ``cpu``'s data/unified caches."""
    found: dict[int, tuple[set[int], int | None]] = {}
    try:
        indexes = sorted(p for p in (cpu_dir / "cache").iterdir() if p.name.startswith("index"))
    except OSError:
        return found
    for index in indexes:
        kind = _read(index / "type")
        # Instruction caches hold code, not the working sets we pack; they never decide the LLC.
        if kind is not None and kind.lower() == "instruction":
            continue
        level_text = _read(index / "level")
        try:
            level = int(level_text) if level_text is not None else None
        except ValueError:
            level = None
        if level is None:
            logger.warning("ignoring %s: level %r is not a number", index, level_text)
            continue
        shared: set[int] | None = None
        list_text = _read(index / "shared_cpu_list")
        try:
            if list_text is not None:
                shared = set(parse_cpu_list(list_text))
            elif (map_text := _read(index / "shared_cpu_map")) is not None:
                # Kernels before 2.6.29 only have the hex mask.
                shared = _parse_cpu_mask(map_text)
        except ValueError as error:
            logger.warning("ignoring %s: %s", index, error)
            continue
        if shared is None:
            logger.debug("ignoring %s: no shared_cpu_list or shared_cpu_map", index)
            continue
        size_text = _read(index / "size")
        size: int | None = None
        if size_text:
            try:
                size = parse_size(size_text, what=f"cache size in {index / 'size'}") or None
            except ValueError as error:
                logger.warning("LLC size unknown for %s: %s", index, error)
        previous = found.get(level)
        # Two data/unified caches at one level would be odd; keep the more widely shared one,
        # since that is the one co-scheduled tasks contend for.
        if previous is None or len(shared) > len(previous[0]):
            found[level] = (shared, size)
    return found
