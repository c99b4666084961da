"""Workloads sized for a cache: :class:`KernelCase`, the whole :func:`suite`, and :func:`contention_mix`."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scalpel_executor.core.units import parse_size
from scalpel_executor.workloads.kernels.registry import KERNELS, _validated, get_kernel
from scalpel_executor.workloads.kernels.sizing import size_for_footprint, step_seconds, steps_for_seconds
from scalpel_executor.workloads.kernels.task import run_kernel

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelCase:
    """One task of a kernel workload: ``size`` sets its footprint, ``steps`` its run time."""

    kernel: str
    size: int
    steps: int = 1

    def __post_init__(self) -> None:
        _validated(self.kernel, self.size, self.steps)

    @property
    def name(self) -> str:
        """A label such as ``spmv-n1048576x40``."""
        return f"{self.kernel}-n{self.size}x{self.steps}"

    @property
    def footprint_bytes(self) -> int:
        """Bytes of the arrays the case keeps live (:func:`footprint_bytes`)."""
        return KERNELS[self.kernel].footprint_bytes(self.size)

    def estimated_seconds(self, rates: dict | None = None) -> float:
        """Solo run time predicted by the rate table (:data:`RATES` unless given)."""
        return self.steps * step_seconds(self.kernel, self.size, rates)

    def run(self, seed: int = 0, check: bool = True) -> dict:
        """:func:`run_kernel` on this case."""
        return run_kernel(self.kernel, self.size, self.steps, seed, check)


def scale_to_seconds(case: KernelCase, target_seconds: float, *, probe_seconds: float | None = None,
              seed: int = 0) -> KernelCase:
    """``case`` with the steps that make its solo run last about ``target_seconds`` here.

    Parameters
    ----------
    case : KernelCase
        Kernel and size are kept; steps are replaced.
    target_seconds : float
        Wanted solo run time.
    probe_seconds : float, optional
        Time spent measuring; default min(0.5, target / 4), and at least one step.
    seed : int
        Seeds the probe's data.

    Returns
    -------
    KernelCase

    Notes
    -----
    Runs the kernel in this process, on one BLAS thread: call it where the task will run (or on
    an idle core of the same machine). Costs one allocation, one warm-up step and about
    ``probe_seconds`` (:func:`~scalpel_executor.workloads.kernels.sizing.steps_for_seconds`).
    """
    steps = steps_for_seconds(case.kernel, case.size, target_seconds, probe_seconds=probe_seconds, seed=seed)
    return replace(case, steps=steps)


#: Solo run time ranges, in seconds, of the cases :func:`suite` builds.
SCALES = {"full": (1.0, 10.0), "bench": (0.4, 2.0), "quick": (0.05, 0.5)}


def _validated_machine(llc_bytes: object, cores: int, scale: str) -> tuple[int, tuple[float, float]]:
    llc = parse_size(llc_bytes, what="llc_bytes")
    if llc <= 0:
        raise ValueError(f"llc_bytes must be positive, got {llc_bytes!r}")
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an integer >= 1 (cores sharing the LLC), got {cores!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return llc, SCALES[scale]


def _case_for(name: str, size: int, seconds: float, longest: float, rates: dict | None) -> KernelCase:
    """A case of ``name`` near ``size`` lasting about ``seconds``; the size shrinks if one step
    alone would outlast ``longest``."""
    kernel = KERNELS[name]
    while size > kernel.min_size and step_seconds(name, size, rates) > longest:
        size = max(kernel.min_size, int(size * 0.95))
    return KernelCase(name, size, max(1, round(seconds / step_seconds(name, size, rates))))


def suite(llc_bytes: object, cores: int, scale: str = "full", seed: int = 0, *,
          kernels: Sequence[str] | None = None, rates: dict | None = None) -> list[KernelCase]:
    """Every kernel at three footprints around an LLC, with solo run times in the scale's range.

    Parameters
    ----------
    llc_bytes : int or str
        Size of one last-level cache, e.g. ``32 * 2**20`` or ``"32MiB"``. Give the real size:
        a VM's sysfs may report its host's.
    cores : int
        Cores sharing that cache; ``llc_bytes / cores`` is a core's share.
    scale : {"full", "bench", "quick"}
        Solo run times drawn log-uniformly from the scale's range in :data:`SCALES`: 1-10 s
        ("full"), 0.4-2 s ("bench") or 0.05-0.5 s ("quick").
    seed : int
        Seeds the run-time draws.
    kernels : sequence of str, optional
        Default: all of :data:`KERNELS`.
    rates : dict, optional
        A rate table shaped like :data:`RATES`, the default, which was measured on the development
        machine, so run times elsewhere are off by that machine's speed (see :func:`scale_to_seconds`).

    Returns
    -------
    list of KernelCase
        Per kernel, in :data:`KERNELS` order: a *small* case (footprint at most a sixteenth of a
        core's share), a *medium* one (about 60% of the LLC: fits alone, not next to another) and
        a *large* one (at least 1.5 x the LLC). A kernel whose single step at that footprint
        would outlast the range gets a smaller size (nussinov and doitgen at the large end).

    Notes
    -----
    Pure: runs nothing. O(kernels x log size).

    Examples
    --------
    >>> cases = suite("32MiB", 2, "quick", kernels=["spmv"])
    >>> [round(case.footprint_bytes / 2**20, 1) for case in cases]
    [1.0, 19.2, 48.0]
    """
    llc, (shortest, longest) = _validated_machine(llc_bytes, cores, scale)
    draw = np.random.default_rng(seed)
    share = llc / cores
    targets = ((share / 16, False), (0.6 * llc, False), (1.5 * llc, True))
    cases: list[KernelCase] = []
    for name in kernels or KERNELS:
        get_kernel(name)
        for footprint, at_least in targets:
            seconds = math.exp(draw.uniform(math.log(shortest), math.log(longest)))
            case = _case_for(name, size_for_footprint(name, footprint, at_least=at_least), seconds, longest, rates)
            if case.size != size_for_footprint(name, footprint, at_least=at_least):
                logger.debug("%s: one step above %.3g s at the wanted footprint; size %d instead", name, longest, case.size)
            if all(case.kernel != other.kernel or case.size > other.size for other in cases):
                cases.append(case)  # else a capped size fell back onto a smaller level's
    return cases


def contention_mix(llc_bytes: object, cores: int, tasks: int, *, scale: str = "full", seed: int = 0,
                   kernels: Sequence[str] = ("spmv",), large_fraction: float = 0.6, small_fraction: float = 1 / 16,
                   seconds: float | None = None, rates: dict | None = None) -> list[KernelCase]:
    """A batch where co-scheduling matters: large cases that fit the LLC alone but not together,
    small ones far below a core's share, similar solo run times, in the order that hurts.

    Parameters
    ----------
    llc_bytes, cores, scale, rates
        As for :func:`suite`.
    tasks : int
        Number of cases; ``ceil(tasks / 2)`` large, the rest small.
    seed : int
        Seeds a +-10% jitter of the run times (so they are similar, not equal).
    kernels : sequence of str
        Cycled over the cases; default the irregular ``spmv``, the most contention-sensitive.
    large_fraction : float
        Footprint of a large case as a fraction of the LLC (default 0.6).
    small_fraction : float
        Footprint of a small case as a fraction of a core's share ``llc_bytes / cores``.
    seconds : float, optional
        Solo run time of every case; default the geometric middle of the scale's range.

    Returns
    -------
    list of KernelCase
        All large cases first, then all small ones: the order a user naturally writes, under
        which a first-in-first-out executor co-runs large with large.

    Examples
    --------
    >>> mix = contention_mix("32MiB", 2, 4, scale="quick")
    >>> [round(case.footprint_bytes / 2**20, 1) for case in mix]
    [19.2, 19.2, 1.0, 1.0]
    """
    llc, (shortest, longest) = _validated_machine(llc_bytes, cores, scale)
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 0:
        raise ValueError(f"tasks must be an integer >= 0, got {tasks!r}")
    if not kernels:
        raise ValueError("kernels must name at least one kernel, e.g. ('spmv',)")
    for fraction, what in ((large_fraction, "large_fraction"), (small_fraction, "small_fraction")):
        if not (0 < fraction < math.inf):
            raise ValueError(f"{what} must be a positive fraction, got {fraction!r}")
    target = math.sqrt(shortest * longest) if seconds is None else seconds
    if not (target > 0) or math.isinf(target):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    jitter = np.random.default_rng(seed).uniform(0.9, 1.1, tasks)
    large = (tasks + 1) // 2
    cases = []
    for index in range(tasks):
        name = kernels[index % len(kernels)]
        footprint = large_fraction * llc if index < large else small_fraction * llc / cores
        size = size_for_footprint(name, footprint)
        cases.append(_case_for(name, size, target * jitter[index], max(longest, target * 1.1), rates))
    return cases
