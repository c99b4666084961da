"""Which CPUs share a last-level cache: the machine model the scheduler packs tasks onto.

Everything that schedules sees a :class:`Topology`: an ordered tuple of :class:`Domain` objects,
each a set of CPUs that share one last-level cache (LLC), with the size of that cache when it is
known. This module only models; it reads nothing. A topology comes from:

* :func:`scalpel_executor.host.sysfs.detect_topology`, which reads Linux sysfs (the one place
  where hardware facts enter the program);
* :meth:`Topology.from_spec`, a simulated machine from a short string such as ``"2x4:12MiB"``;
* :meth:`Topology.from_cpu_lists`, explicit CPU lists per domain;
* :func:`scalpel_executor.host.sysfs.resolve_topology`, which picks one of the above from a
  user-facing override.

Notes
-----
"Cores" means the CPUs a domain schedules onto. With ``smt=False`` (the default) detection keeps
one hardware thread per physical core, because co-scheduling two cache-hungry tasks on sibling
hyperthreads shares the L1/L2 as well and defeats the point of LLC-aware packing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scalpel_executor.core.cpulist import cpu_id, cpu_set, format_cpu_list, parse_cpu_list
from scalpel_executor.core.units import format_size, parse_size

__all__ = ["Domain", "Topology", "parse_cpu_list", "format_cpu_list"]

# Simulated machines are never this big; the cap keeps "100000x100000" from eating memory.
_MAX_SPEC_CPUS = 1 << 16
_SPEC_TERM = re.compile(r"^(?:([0-9]+)x)?([0-9]+)$")
_SPEC_FORM = (
    "expected DOMAINSxCORES[:LLC] such as '2x4:12MiB' or '2x4', "
    "or CORES+CORES[+...][:LLC] such as '4+2:16MiB'"
)


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
        cpus = [cpu_id(cpu, where=where) for cpu in self.cpus]
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

    def first(self, cores: int | None) -> "Topology":
        """The first ``cores`` CPUs of this topology, domain by domain (all of them for None or more):
        where ``max_workers_per_node`` keeps a node's workers."""
        if cores is None or cores >= self.total_cores:
            return self
        kept, left = [], cores
        for domain in self.domains:
            if left > 0:
                kept.append(Domain(len(kept), domain.cpus[:left], domain.llc_size))
                left -= len(kept[-1].cpus)
        return Topology(tuple(kept), self.source)

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
    def from_spec(cls, spec: str) -> "Topology":
        """Build a simulated machine from a short description.

        Parameters
        ----------
        spec : str
            ``DOMAINSxCORES[:LLC]`` such as ``"2x4:12MiB"`` (2 domains of 4 cores, 12 MiB LLC
            each) or ``"2x4"`` (LLC size unknown), or ``CORES+CORES[+...][:LLC]`` such as
            ``"4+2:16MiB"`` for unequal domains. The two forms mix: ``"2x4+2"`` is 4, 4 and 2
            cores. Whitespace is ignored and ``x`` may be upper case. The size takes any form
            :func:`scalpel_executor.core.units.parse_size` accepts.

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
            CPUs this process may use; None (default) checks nothing.
            :func:`~scalpel_executor.host.sysfs.resolve_topology` passes the affinity.

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
        allowed = None if allowed_cpus is None else cpu_set(allowed_cpus)

        owner: dict[int, int] = {}
        groups = []
        for position, raw in enumerate(lists):
            where = f"domain {position} of cpu_lists"
            if isinstance(raw, str):
                members = parse_cpu_list(raw)
            elif isinstance(raw, Iterable) and not isinstance(raw, (bytes, Mapping)):
                members = [cpu_id(cpu, where=where) for cpu in raw]
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
                if allowed is not None and cpu not in allowed:
                    raise ValueError(
                        f"CPU {cpu} in {where} is not available to this process (allowed: "
                        f"{format_cpu_list(allowed) or 'none'}); drop it or widen the affinity "
                        f"with taskset"
                    )
            groups.append((members, size))
        return cls._from_groups(groups, "cpu-lists")
