"""Which CPUs share a last-level cache: the machine model the scheduler packs tasks onto.

This module is the one place where hardware facts enter the program. Everything else sees a
:class:`Topology`: an ordered tuple of :class:`Domain` objects, each a set of CPUs that share one
last-level cache (LLC), with the size of that cache when it is known.

A topology comes from one of four places:

* :meth:`Topology.detect` reads Linux sysfs (``/sys/devices/system/cpu``) through a root path
  that tests replace with a fake tree, the way sched_ext's ``scx_utils`` topology does;
* :meth:`Topology.from_spec` builds a simulated machine from a short string such as
  ``"2x4:12MiB"``;
* :meth:`Topology.from_cpu_lists` takes explicit CPU lists per domain for the real machine;
* :meth:`Topology.resolve` picks one of the above from a user-facing override.

Notes
-----
"Cores" in this module means the CPUs a domain schedules onto. With ``smt=False`` (the default)
that is one hardware thread per physical core, because co-scheduling two cache-hungry tasks on
sibling hyperthreads shares the L1/L2 as well and defeats the point of LLC-aware packing. With
``smt=True`` every hardware thread counts as a core.
"""

from __future__ import annotations

import functools
import logging
import operator
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalpel_executor.units import format_size, parse_size

__all__ = ["Domain", "Topology", "parse_cpu_list", "format_cpu_list"]

logger = logging.getLogger("scalpel_executor.topology")

# Linux's NR_CPUS tops out at 8192; anything far beyond that is a typo such as "0-4000000000",
# which would otherwise try to build a multi-gigabyte set.
_MAX_CPU_ID = (1 << 20) - 1
# Simulated machines are never this big; the cap keeps "100000x100000" from eating memory.
_MAX_SPEC_CPUS = 1 << 16

_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
_CPU_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
_SPEC_TERM = re.compile(r"^(?:([0-9]+)x)?([0-9]+)$")
_SPEC_FORM = (
    "expected DOMAINSxCORES[:LLC] such as '2x4:12MiB' or '2x4', "
    "or CORES+CORES[+...][:LLC] such as '4+2:16MiB'"
)


# --------------------------------------------------------------------------------------------
# CPU lists
# --------------------------------------------------------------------------------------------


def _cpu_id(value: object, *, where: str) -> int:
    """Return ``value`` as a CPU id, or raise ValueError saying ``where`` it came from."""
    # bool is an int subclass, but True as a CPU id is always a mistake.
    if isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not a CPU id; CPU ids are integers such as 0 or 7")
    try:
        cpu = operator.index(value)  # accepts int and numpy integers, refuses 3.0 and "3"
    except TypeError:
        raise ValueError(
            f"{where}: {value!r} is not a CPU id; CPU ids are integers such as 0 or 7"
        ) from None
    if cpu < 0:
        raise ValueError(f"{where}: CPU {cpu} is negative; CPU ids start at 0")
    return cpu


def parse_cpu_list(text: str) -> list[int]:
    """Parse a Linux CPU list such as ``"0-3,8,10-11"``.

    This is the format of sysfs files like ``shared_cpu_list`` and of ``taskset -c``.

    Parameters
    ----------
    text : str
        Comma-separated CPU ids and inclusive ranges ``lo-hi``. Whitespace around items and a
        trailing newline are ignored. An empty string means no CPUs, as the kernel writes an
        empty line for an empty mask (e.g. ``/sys/devices/system/cpu/offline``).

    Returns
    -------
    list of int
        The CPU ids, sorted, each once.

    Raises
    ------
    ValueError
        If an item is neither a number nor a range, a range runs backwards or a CPU id is
        implausibly large; the message quotes ``text``.

    Examples
    --------
    >>> parse_cpu_list("0-3,8,10-11")
    [0, 1, 2, 3, 8, 10, 11]
    >>> parse_cpu_list("5\\n")
    [5]
    >>> parse_cpu_list("")
    []
    """
    if not isinstance(text, str):
        raise TypeError(f"CPU list must be a string like '0-3,8', got {type(text).__name__} {text!r}")
    stripped = text.strip()
    if not stripped:
        return []
    cpus: set[int] = set()
    for raw in stripped.split(","):
        item = raw.strip()
        match = _CPU_RANGE.match(item)
        if not match:
            raise ValueError(
                f"malformed CPU list {text!r}: {item!r} is neither a CPU id nor a range like "
                f"'0-3'; write it like '0-3,8,10-11'"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(
                f"malformed CPU list {text!r}: range {item!r} runs backwards; write it as "
                f"'{high}-{low}'"
            )
        if high > _MAX_CPU_ID:
            raise ValueError(
                f"malformed CPU list {text!r}: CPU {high} is beyond any real machine "
                f"(largest accepted id is {_MAX_CPU_ID}); check for a typo"
            )
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """Format CPU ids as a compact Linux CPU list, the inverse of :func:`parse_cpu_list`.

    Parameters
    ----------
    cpus : iterable of int
        Non-negative CPU ids in any order; duplicates are ignored.

    Returns
    -------
    str
        Runs of two or more consecutive ids as ``lo-hi`` (as the kernel writes them), joined by
        commas; ``""`` for no CPUs.

    Raises
    ------
    ValueError
        If an element is not a non-negative integer.

    Examples
    --------
    >>> format_cpu_list([0, 1, 2, 3, 8])
    '0-3,8'
    >>> format_cpu_list([11, 10, 8])
    '8,10-11'
    """
    ids = sorted({_cpu_id(cpu, where="format_cpu_list") for cpu in cpus})
    parts: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            low, high = ids[start], ids[i - 1]
            parts.append(str(low) if low == high else f"{low}-{high}")
            start = i
    return ",".join(parts)


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """A set of CPUs that share one last-level cache.

    Parameters
    ----------
    index : int
        Position in the owning :class:`Topology`, ``0..P-1`` in order of lowest CPU.
    cpus : tuple of int
        The CPUs tasks of this domain run on. Stored sorted; any iterable is accepted.
    llc_size : int or None
        Bytes of the shared LLC, or None when unknown.

    Examples
    --------
    >>> d = Domain(0, (3, 1, 2, 0), 12 * 1024 * 1024)
    >>> d.cpus, d.cores
    ((0, 1, 2, 3), 4)
    """

    index: int
    cpus: tuple[int, ...]
    llc_size: int | None = None

    def __post_init__(self) -> None:
        # Validated here so every Domain, however built, keeps the invariants callers rely on
        # (sorted, unique, non-empty), rather than each factory re-checking them.
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise ValueError(f"domain index must be a non-negative int, got {self.index!r}")
        where = f"domain {self.index}"
        cpus = [_cpu_id(cpu, where=where) for cpu in self.cpus]
        if not cpus:
            raise ValueError(f"{where} has no CPUs; every domain needs at least one")
        if len(set(cpus)) != len(cpus):
            twice = sorted({cpu for cpu in cpus if cpus.count(cpu) > 1})
            raise ValueError(f"{where} lists CPU(s) {format_cpu_list(twice)} more than once")
        object.__setattr__(self, "cpus", tuple(sorted(cpus)))
        if self.llc_size is not None:
            if isinstance(self.llc_size, bool) or not isinstance(self.llc_size, int) or self.llc_size <= 0:
                raise ValueError(
                    f"{where}: llc_size must be a positive number of bytes or None, "
                    f"got {self.llc_size!r}"
                )

    @property
    def cores(self) -> int:
        """Number of CPUs in the domain."""
        return len(self.cpus)


@dataclass(frozen=True)
class Topology:
    """The machine as the scheduler sees it: LLC domains in order of lowest CPU.

    Build one with :meth:`detect`, :meth:`from_spec`, :meth:`from_cpu_lists` or
    :meth:`resolve` rather than directly.

    Parameters
    ----------
    domains : tuple of Domain
        Non-empty; ``domains[i].index == i``; ordered by lowest CPU; no CPU in two domains.
    source : str
        How the topology was found: ``"sysfs:L3"`` (or another level), ``"sysfs:package"``,
        ``"psutil"``, ``"spec"`` or ``"cpu-lists"``.

    Examples
    --------
    >>> topo = Topology.from_spec("2x4:12MiB")
    >>> topo.processors, topo.cores_per_domain, topo.llc_size
    (2, (4, 4), 12582912)
    >>> topo.domain_of(5).index
    1
    >>> print(topo.describe())
    2 LLC domains (spec), 8 cores
      domain 0: 4 cores, CPUs 0-3, LLC 12.0 MiB
      domain 1: 4 cores, CPUs 4-7, LLC 12.0 MiB
    """

    domains: tuple[Domain, ...]
    source: str

    def __post_init__(self) -> None:
        domains = tuple(self.domains)
        object.__setattr__(self, "domains", domains)
        if not domains:
            raise ValueError("a Topology needs at least one domain, got none")
        seen: dict[int, int] = {}
        for position, domain in enumerate(domains):
            if not isinstance(domain, Domain):
                raise ValueError(f"domains[{position}] is {domain!r}, not a Domain")
            if domain.index != position:
                raise ValueError(
                    f"domains[{position}] has index {domain.index}; indices must be 0..P-1 in order"
                )
            if position and domain.cpus[0] < domains[position - 1].cpus[0]:
                raise ValueError(
                    f"domain {position} (CPUs {format_cpu_list(domain.cpus)}) comes after domain "
                    f"{position - 1} (CPUs {format_cpu_list(domains[position - 1].cpus)}); "
                    f"domains must be ordered by lowest CPU"
                )
            for cpu in domain.cpus:
                if cpu in seen:
                    raise ValueError(
                        f"CPU {cpu} is in both domain {seen[cpu]} and domain {position}; "
                        f"each CPU belongs to one LLC domain"
                    )
                seen[cpu] = position

    # -- derived facts ------------------------------------------------------------------------

    @property
    def processors(self) -> int:
        """P, the number of LLC domains."""
        return len(self.domains)

    @property
    def cores_per_domain(self) -> tuple[int, ...]:
        """Core count of each domain, in domain order."""
        return tuple(domain.cores for domain in self.domains)

    @property
    def cpus(self) -> tuple[int, ...]:
        """All CPUs, domain by domain; position in this tuple is a CPU's slot number."""
        return tuple(cpu for domain in self.domains for cpu in domain.cpus)

    @property
    def total_cores(self) -> int:
        """Number of CPUs over all domains."""
        return sum(self.cores_per_domain)

    @property
    def llc_size(self) -> int | None:
        """The LLC size shared by all domains, else the smallest known one; None if unknown.

        Notes
        -----
        The smallest is the safe choice for packing: a working set that fits the smallest
        cache fits them all.
        """
        known = [domain.llc_size for domain in self.domains if domain.llc_size is not None]
        return min(known) if known else None

    @functools.cached_property
    def _domain_by_cpu(self) -> dict[int, Domain]:
        # cached_property writes to the instance __dict__ directly, so it works on a frozen
        # dataclass and is not a field (no effect on eq, hash or repr).
        return {cpu: domain for domain in self.domains for cpu in domain.cpus}

    def domain_of(self, cpu: int) -> Domain:
        """Return the domain that contains ``cpu``.

        Raises
        ------
        KeyError
            If ``cpu`` is in no domain; the message lists the CPUs that are.
        """
        try:
            return self._domain_by_cpu[cpu]
        except (KeyError, TypeError):
            raise KeyError(
                f"CPU {cpu!r} is not in this topology (its CPUs are {format_cpu_list(self.cpus)})"
            ) from None

    def is_uniform(self) -> bool:
        """True if every domain has the same number of cores."""
        return len(set(self.cores_per_domain)) == 1

    def to_dict(self) -> dict:
        """Return a JSON-ready description.

        Returns
        -------
        dict
            ``{"source", "processors", "total_cores", "domains": [{"index", "cpus",
            "llc_size", "llc_size_human"}]}``; ``llc_size`` and ``llc_size_human`` are None
            when unknown.
        """
        return {
            "source": self.source,
            "processors": self.processors,
            "total_cores": self.total_cores,
            "domains": [
                {
                    "index": domain.index,
                    "cpus": list(domain.cpus),
                    "llc_size": domain.llc_size,
                    "llc_size_human": (
                        None if domain.llc_size is None else format_size(domain.llc_size)
                    ),
                }
                for domain in self.domains
            ],
        }

    def describe(self) -> str:
        """Return a few lines of text for people, one per domain.

        Examples
        --------
        >>> print(Topology.from_spec("4+2").describe())
        2 LLC domains (spec), 6 cores
          domain 0: 4 cores, CPUs 0-3, LLC size unknown
          domain 1: 2 cores, CPUs 4-5, LLC size unknown
        """
        # Name the cache level when sysfs told us which one it is ("L3 12.0 MiB").
        label = self.source.split(":", 1)[1] if self.source.startswith("sysfs:L") else "LLC"
        plural = "s" if self.processors != 1 else ""
        lines = [
            f"{self.processors} LLC domain{plural} ({self.source}), "
            f"{self.total_cores} core{'s' if self.total_cores != 1 else ''}"
        ]
        for domain in self.domains:
            size = (
                f"{label} size unknown"
                if domain.llc_size is None
                else f"{label} {format_size(domain.llc_size)}"
            )
            lines.append(
                f"  domain {domain.index}: {domain.cores} core{'s' if domain.cores != 1 else ''}, "
                f"CPUs {format_cpu_list(domain.cpus)}, {size}"
            )
        return "\n".join(lines)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def _from_groups(
        cls, groups: Iterable[tuple[Iterable[int], int | None]], source: str
    ) -> "Topology":
        """Number ``(cpus, llc_size)`` groups 0.. by lowest CPU, dropping empty ones."""
        kept = [(sorted(cpus), size) for cpus, size in groups]
        kept = [(cpus, size) for cpus, size in kept if cpus]
        kept.sort(key=lambda group: group[0][0])
        return cls(
            tuple(Domain(i, tuple(cpus), size) for i, (cpus, size) in enumerate(kept)), source
        )

    @classmethod
    def detect(
        cls,
        sysfs_root: str | os.PathLike = "/sys",
        *,
        allowed_cpus: Iterable[int] | None = None,
        smt: bool = False,
    ) -> "Topology":
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
        >>> topo = Topology.detect()  # doctest: +SKIP
        >>> print(topo.describe())  # doctest: +SKIP
        1 LLC domain (sysfs:L3), 2 cores
          domain 0: 2 cores, CPUs 0-1, L3 480.0 MiB
        """
        allowed = _allowed_set(allowed_cpus)
        cpu_root = Path(sysfs_root) / "devices" / "system" / "cpu"
        cpu_dirs = _cpu_dirs(cpu_root)
        if not cpu_dirs:
            return cls._detect_without_sysfs(allowed, cpu_root)

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
        topology = cls._from_groups(result_groups, source)
        logger.debug("detected topology from %s: %s", cpu_root, topology.to_dict())
        return topology

    @classmethod
    def _detect_without_sysfs(cls, allowed: set[int], cpu_root: Path) -> "Topology":
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
        return cls._from_groups([(allowed, None)], "psutil")

    @classmethod
    def from_spec(cls, spec: str) -> "Topology":
        """Build a simulated machine from a short description.

        Parameters
        ----------
        spec : str
            ``DOMAINSxCORES[:LLC]`` such as ``"2x4:12MiB"`` (2 domains of 4 cores, 12 MiB LLC
            each) or ``"2x4"`` (LLC size unknown), or ``CORES+CORES[+...][:LLC]`` such as
            ``"4+2:16MiB"`` for unequal domains. The two forms mix: ``"2x4+2"`` is 4, 4 and 2
            cores. Whitespace is ignored and ``x`` may be upper case. The size takes any form
            :func:`scalpel_executor.units.parse_size` accepts.

        Returns
        -------
        Topology
            CPUs numbered 0.. consecutively across domains, source ``"spec"``. They are not
            checked against this process's affinity: a spec describes a machine we may not
            have.

        Raises
        ------
        ValueError
            For a malformed spec; the message quotes it and shows the accepted forms.

        Examples
        --------
        >>> Topology.from_spec("2x4:12MiB").cores_per_domain
        (4, 4)
        >>> Topology.from_spec(" 4 + 2 : 16MiB ").domains[1].cpus
        (4, 5)
        """
        if not isinstance(spec, str):
            raise TypeError(
                f"topology spec must be a string such as '2x4:12MiB', got "
                f"{type(spec).__name__} {spec!r}"
            )

        def malformed(reason: str) -> ValueError:
            return ValueError(f"topology spec {spec!r} is malformed: {reason}; {_SPEC_FORM}")

        compact = re.sub(r"\s+", "", spec).lower()
        if not compact:
            raise malformed("it is empty")
        shape, colon, size_text = compact.partition(":")
        llc_size: int | None = None
        if colon:
            if not size_text:
                raise malformed("no LLC size after ':'")
            try:
                llc_size = parse_size(size_text, what="LLC size")
            except ValueError:
                raise malformed(
                    f"LLC size {size_text!r} is not a size such as '12MiB' or '32768K'"
                ) from None
            if llc_size <= 0:
                raise malformed("the LLC size must be positive")
        if not shape:
            raise malformed("no domains before ':'")

        cores: list[int] = []
        for term in shape.split("+"):
            match = _SPEC_TERM.match(term)
            if not match:
                raise malformed(
                    f"{term!r} is not COUNTxCORES or CORES" if term else "empty term around '+'"
                )
            count = int(match.group(1)) if match.group(1) is not None else 1
            per_domain = int(match.group(2))
            if count == 0:
                raise malformed(f"{term!r} has no domains; the count must be at least 1")
            if per_domain == 0:
                raise malformed(f"{term!r} has domains of 0 cores; each needs at least 1")
            if len(cores) + count > _MAX_SPEC_CPUS or sum(cores) + count * per_domain > _MAX_SPEC_CPUS:
                raise malformed(f"more than {_MAX_SPEC_CPUS} CPUs in total")
            cores.extend([per_domain] * count)

        domains = []
        first = 0
        for index, n in enumerate(cores):
            domains.append(Domain(index, tuple(range(first, first + n)), llc_size))
            first += n
        return cls(tuple(domains), "spec")

    @classmethod
    def from_cpu_lists(
        cls,
        cpu_lists: Sequence[Sequence[int]],
        *,
        llc_size: int | str | None = None,
        allowed_cpus: Iterable[int] | None = None,
    ) -> "Topology":
        """Use explicit CPU lists, one per LLC domain, on this machine.

        Parameters
        ----------
        cpu_lists : sequence of sequences of int
            The CPUs of each domain, e.g. ``[[0, 1, 2, 3], [4, 5, 6, 7]]``. A domain may also be
            a CPU-list string such as ``"0-3"``.
        llc_size : int or str, optional
            LLC size of every domain, in bytes or as a size string such as ``"12MiB"``; None
            (default) means unknown.
        allowed_cpus : iterable of int or str, optional
            CPUs this process may use; defaults to ``os.sched_getaffinity(0)``.

        Returns
        -------
        Topology
            Source ``"cpu-lists"``. Domains are renumbered by lowest CPU, so ``[[4, 5], [0, 1]]``
            gives domain 0 = CPUs 0-1.

        Raises
        ------
        ValueError
            For no domains, an empty domain, a CPU listed twice, a CPU that is not a
            non-negative int, a CPU outside ``allowed_cpus`` or a bad ``llc_size``. Domains in
            messages are numbered by their position in ``cpu_lists``.

        Examples
        --------
        >>> Topology.from_cpu_lists([[0, 1], [2, 3]], llc_size="12MiB",
        ...                         allowed_cpus=range(4)).cores_per_domain
        (2, 2)
        """
        if isinstance(cpu_lists, (str, bytes)) or isinstance(cpu_lists, Mapping):
            raise ValueError(
                f"cpu_lists must be a list of CPU lists such as [[0, 1], [2, 3]], got "
                f"{cpu_lists!r}; for a spec string such as '2x4' use Topology.from_spec"
            )
        try:
            lists = list(cpu_lists)
        except TypeError:
            raise ValueError(
                f"cpu_lists must be a list of CPU lists such as [[0, 1], [2, 3]], got "
                f"{cpu_lists!r}"
            ) from None
        if not lists:
            raise ValueError(
                "cpu_lists is empty; give at least one domain, e.g. [[0, 1, 2, 3]]"
            )
        size = None if llc_size is None else parse_size(llc_size, what="llc_size")
        if size is not None and size <= 0:
            raise ValueError(f"llc_size must be positive, got {llc_size!r}; use None if unknown")
        allowed = _allowed_set(allowed_cpus)

        owner: dict[int, int] = {}
        groups = []
        for position, raw in enumerate(lists):
            where = f"domain {position} of cpu_lists"
            if isinstance(raw, str):
                members = parse_cpu_list(raw)
            elif isinstance(raw, Iterable) and not isinstance(raw, (bytes, Mapping)):
                members = [_cpu_id(cpu, where=where) for cpu in raw]
            else:
                raise ValueError(
                    f"{where} is {raw!r}, not a list of CPUs; write it like [0, 1, 2, 3] or '0-3'"
                )
            if not members:
                raise ValueError(
                    f"{where} is empty; every domain needs at least one CPU (drop the empty list)"
                )
            for cpu in members:
                if cpu in owner:
                    where_else = (
                        "twice in that domain"
                        if owner[cpu] == position
                        else f"in domain {owner[cpu]} too"
                    )
                    raise ValueError(
                        f"CPU {cpu} in {where} is listed {where_else}; "
                        f"each CPU belongs to exactly one domain"
                    )
                owner[cpu] = position
                if cpu not in allowed:
                    raise ValueError(
                        f"CPU {cpu} in {where} is not available to this process (allowed: "
                        f"{format_cpu_list(allowed) or 'none'}); drop it or widen the affinity "
                        f"with taskset"
                    )
            groups.append((members, size))
        return cls._from_groups(groups, "cpu-lists")

    @classmethod
    def resolve(
        cls,
        override: "Topology | str | Sequence[Sequence[int]] | None" = None,
        *,
        sysfs_root: str | os.PathLike = "/sys",
        allowed_cpus: Iterable[int] | None = None,
        smt: bool = False,
    ) -> "Topology":
        """Turn a user's topology setting into a :class:`Topology`.

        Parameters
        ----------
        override : Topology, str, sequence of CPU lists or None
            None detects the machine (:meth:`detect` with ``sysfs_root``, ``allowed_cpus``
            and ``smt``); a Topology is returned as is; a string is a spec for
            :meth:`from_spec`; a sequence of CPU lists goes to :meth:`from_cpu_lists` with
            ``allowed_cpus``.

        Raises
        ------
        TypeError
            For any other kind of value.

        Examples
        --------
        >>> Topology.resolve("2x4").processors
        2
        """
        if override is None:
            return cls.detect(sysfs_root, allowed_cpus=allowed_cpus, smt=smt)
        if isinstance(override, Topology):
            return override
        if isinstance(override, str):
            return cls.from_spec(override)
        if isinstance(override, Iterable) and not isinstance(override, (bytes, Mapping)):
            return cls.from_cpu_lists(override, allowed_cpus=allowed_cpus)  # type: ignore[arg-type]
        raise TypeError(
            f"topology must be None (detect), a Topology, a spec string such as '2x4:12MiB' or "
            f"a list of CPU lists such as [[0, 1], [2, 3]]; got {type(override).__name__} "
            f"{override!r}"
        )


# --------------------------------------------------------------------------------------------
# sysfs reading
# --------------------------------------------------------------------------------------------


def _allowed_set(allowed_cpus: Iterable[int] | str | None) -> set[int]:
    """The CPUs this process may use: ``allowed_cpus`` validated, or the affinity mask."""
    if allowed_cpus is None:
        try:
            return set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            # Not Linux: psutil knows the affinity on Windows; otherwise assume all CPUs.
            import psutil

            try:
                return set(psutil.Process().cpu_affinity())
            except (AttributeError, psutil.Error, OSError):
                return set(range(psutil.cpu_count() or os.cpu_count() or 1))
    if isinstance(allowed_cpus, str):
        return set(parse_cpu_list(allowed_cpus))
    return {_cpu_id(cpu, where="allowed_cpus") for cpu in allowed_cpus}


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
