"""The simulated studies' machines: each one's topology, task pool, batch sizes and contention models.

``benchmarks/archive/policy_study.py`` and ``benchmarks/tail_search.py`` plan on these machines, and
``benchmarks/scale.py`` draws its wide machine's pool with :func:`suite_pool`, so a (machine, seed,
task count, repetition) names the same batch in every study
(:func:`scalpel_executor.experiments.simulated_policies.batch_for`).
"""

from __future__ import annotations

import json
from pathlib import Path

from scalpel_executor.core.contention_fit import load_model
from scalpel_executor.core.machines import MACHINES as PRESETS
from scalpel_executor.core.simulate import ContentionModel, SimTask
from scalpel_executor.core.domains import Topology
from scalpel_executor.learning.exchange import load_profile
from scalpel_executor.workloads.kernels import suite

#: The studies' machines: a preset's spec, its task pool, and its batch sizes (or factors of its
#: core count). ``table2``: the paper's Table II kernels; ``suite``: the kernel suite sized for the
#: machine's cache (:func:`suite_pool`).
STUDY_MACHINES = {
    "paper": {"spec": PRESETS["paper"].spec, "pool": "table2", "sizes": list(range(8, 24))},
    "wide": {"spec": PRESETS["wide"].spec, "pool": "suite", "factors": [10, 25]},
    "epyc": {"spec": PRESETS["epyc"].spec, "pool": "suite", "factors": [10, 25]},
    "xeon16": {"spec": PRESETS["xeon16"].spec, "pool": "suite", "factors": [10, 25]},
}


def suite_pool(llc: int, cores: int) -> list[SimTask]:
    """The kernel suite sized for an LLC of ``llc`` bytes shared by ``cores`` cores, as SimTasks."""
    return [SimTask(c.name, c.estimated_seconds(), c.footprint_bytes) for c in suite(llc, cores, "full", seed=7)]


def machine_setup(name: str) -> tuple[list[list[int]], float, list[SimTask], list[int]]:
    """Domains (CPU lists), LLC bytes, task pool and default batch sizes of a :data:`STUDY_MACHINES` entry."""
    entry = STUDY_MACHINES[name]
    topology = Topology.from_spec(entry["spec"])
    domains = [list(d.cpus) for d in topology.domains]
    llc = float(topology.llc_size)
    if entry["pool"] == "table2":
        _, pool = load_profile("polybench-xeon-e5620")
        sizes = list(entry["sizes"])
    else:
        pool = suite_pool(int(llc), len(domains[0]))
        sizes = [f * topology.total_cores for f in entry["factors"]]
    return domains, llc, pool, sizes


def model_named(name: str, calibration: Path | None = None) -> ContentionModel:
    """The studies' contention models: ``default``, ``calibrated`` (the ``scalpel calibrate --out``
    document at ``calibration``) or ``xeon16-fit`` (the ``xeon16`` preset's model)."""
    if name == "default":
        return ContentionModel()
    if name == "calibrated" and calibration is not None:
        return load_model(json.loads(Path(calibration).read_text()))
    if name == "xeon16-fit":
        return PRESETS["xeon16"].model
    raise SystemExit(f"unknown model {name!r}: default, calibrated (with a calibration file) or xeon16-fit")
