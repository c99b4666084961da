"""Sizing kernel batches for this machine: the LLC to size them for, and steps that last as planned.

A contention batch only shows contention if its large cases fit the last-level cache alone and
not together, and if large and small cases last alike; both depend on the machine at hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

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
    in_vm = False
    try:
        with open("/proc/cpuinfo") as stream:
            in_vm = any(line.startswith("flags") and " hypervisor" in line for line in stream)
    except OSError:
        pass
    if detected == 0:
        return VM_LLC_ASSUMED, f"sysfs gives no LLC size; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
    if in_vm and detected > VM_LLC_SUSPICIOUS:
        return VM_LLC_ASSUMED, (
            f"sysfs reports {format_size(detected)} inside a virtual machine, which is usually the host's whole "
            f"package; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
        )
    return detected, "from sysfs"


def steps_timed_here(cases: Sequence[KernelCase]) -> tuple[list[KernelCase], list[float]]:
    """The cases with the steps that make each last its planned run time on this machine, and those
    run times: the rate table alone can be off by the machine's speed, more for some kernels.

    Each distinct (kernel, size) is timed here (:func:`~scalpel_executor.workloads.kernels.scale_to_seconds`,
    median of three probes); every case keeps its own planned time, so its jitter survives.
    """
    planned = {c: c.estimated_seconds() for c in cases}
    target = statistics.median(planned.values())
    per_step: dict[tuple, float] = {}
    out = []
    for case in cases:
        key = (case.kernel, case.size)
        if key not in per_step:  # median of three probes of up to 1 s: one short probe was seen 30% off
            probe = min(target, 1.0)
            per_step[key] = statistics.median(target / scale_to_seconds(case, target, probe_seconds=probe).steps
                                              for _ in range(3))
        out.append(KernelCase(case.kernel, case.size, max(1, round(planned[case] / per_step[key]))))
    return out, [c.steps * per_step[(c.kernel, c.size)] for c in out]
