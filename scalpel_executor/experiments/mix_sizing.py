"""Sizing kernel batches for this machine: the LLC to size them for, and steps that last as planned.

A contention batch only shows contention if its large cases fit the last-level cache alone and
not together, and if large and small cases last alike; both depend on the machine at hand.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Mapping, Sequence

from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size, parse_size
from scalpel_executor.workloads.kernels import KernelCase, scale_to_seconds

#: Inside a VM whose sysfs reports a huge (host-wide) LLC, the mixes are sized for this instead.
#: On the development VM (2 vCPUs, sysfs: 480 MiB) pairs of random-gather kernels showed no co-run
#: slowdown at 16 MiB each and 1.25x at 32 MiB each (benchmarks/corun.py, docs/results/machines.md):
#: the cache the two cores really share behaves like one of about 56 MiB.
VM_LLC_ASSUMED = 56 * 2**20
VM_LLC_SUSPICIOUS = 64 * 2**20


def machine_llc(topology: Topology, override: str | int | None) -> tuple[int, str]:
    """The LLC size per domain to size the mix for, and a note saying where it came from."""
    if override is not None:
        return parse_size(override, what="--llc"), "given with --llc"
    detected = int(topology.domains[0].llc_size or 0)
    in_vm = any(line.startswith("flags") and " hypervisor" in line for line in _cpuinfo())
    if detected == 0:
        return VM_LLC_ASSUMED, f"sysfs gives no LLC size; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
    if in_vm and detected > VM_LLC_SUSPICIOUS:
        return VM_LLC_ASSUMED, (
            f"sysfs reports {format_size(detected)} inside a virtual machine, which is usually the host's whole "
            f"package; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
        )
    return detected, "from sysfs"


def step_seconds_here(cases: Sequence[KernelCase], known: Mapping[tuple[str, int], float] | None = None
                      ) -> dict[tuple[str, int], float]:
    """Seconds per step of each distinct (kernel, size) of ``cases`` on this machine: those in
    ``known`` as given (an earlier run's, kept), the others timed here
    (:func:`~scalpel_executor.workloads.kernels.scale_to_seconds`, median of three probes of up to
    1 s: one short probe was seen 30% off)."""
    known = known or {}
    target = statistics.median(c.estimated_seconds() for c in cases) if cases else 0.0
    per_step: dict[tuple[str, int], float] = {}
    for case in cases:
        key = (case.kernel, case.size)
        if key in per_step:
            continue
        if key in known:
            per_step[key] = known[key]
            continue
        probe = min(target, 1.0)
        per_step[key] = statistics.median(target / scale_to_seconds(case, target, probe_seconds=probe).steps
                                          for _ in range(3))
    return per_step


def _cpuinfo(path: str = "/proc/cpuinfo") -> list[str]:
    try:
        with open(path) as stream:
            return stream.readlines()
    except OSError:
        return []


def machine_fingerprint(topology: Topology, cpuinfo: str = "/proc/cpuinfo") -> str:
    """This machine as kept solo and step times know it: CPU model, cores and LLC domains as sysfs
    states them, e.g. ``"AMD EPYC 7763 64-Core Processor; 16 cores in 1 LLC domain(s) of 32 MiB"``.

    Another model, another core count or another cache is another machine, whose times are not
    reused; identical nodes of a cluster share theirs.
    """
    fields = {}
    for line in _cpuinfo(cpuinfo):
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), " ".join(value.split()))
    model = (fields.get("model name") or fields.get("Model") or fields.get("cpu")
             or fields.get("CPU part") or platform.processor() or platform.machine() or "unknown CPU")
    llcs = sorted({int(d.llc_size or 0) for d in topology.domains})
    caches = "/".join(format_size(size) if size else "unknown size" for size in llcs)
    return f"{model}; {len(topology.cpus)} cores in {len(topology.domains)} LLC domain(s) of {caches}"


def steps_timed_here(cases: Sequence[KernelCase], per_step: Mapping[tuple[str, int], float] | None = None
                     ) -> tuple[list[KernelCase], list[float]]:
    """The cases with the steps that make each last its planned run time on this machine, and those
    run times: the rate table alone can be off by the machine's speed, more for some kernels.

    ``per_step``: seconds per step of each (kernel, size) here (:func:`step_seconds_here`, which
    times them when not given). Every case keeps its own planned time, so its jitter survives;
    the same ``per_step`` gives the same cases, so a machine whose step times are kept runs the
    same batch every time.
    """
    if per_step is None:
        per_step = step_seconds_here(cases)
    out = [KernelCase(c.kernel, c.size, max(1, round(c.estimated_seconds() / per_step[(c.kernel, c.size)])))
           for c in cases]
    return out, [c.steps * per_step[(c.kernel, c.size)] for c in out]
