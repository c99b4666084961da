"""Scheduling policies compared in the simulator, every policy on the same random batches.

``scalpel simulate`` prints this comparison for one machine; ``benchmarks/scale.py`` runs it for
machines this one cannot show. Pure: the batches come from a seeded generator, so a (seed, task
count, repetition) names the same batch in every run and for every policy.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from scalpel_executor.core.simulate import ContentionModel, SimTask, simulate
from scalpel_executor.core.topology import Topology


def pick_batch(pool: Sequence[SimTask], count: int, rng: random.Random) -> list[SimTask]:
    """``count`` tasks in a random submission order: a sample, with repeats only past the pool."""
    if count <= len(pool):
        return rng.sample(list(pool), count)
    return [rng.choice(pool) for _ in range(count)]


def compare_policies(
    pool: Sequence[SimTask],
    topology: Topology,
    llc_size: float,
    counts: Sequence[int],
    policies: Sequence[str],
    repeats: int,
    seed: int,
    model: ContentionModel,
    *,
    memory: float | None = None,
    gpus: int = 0,
) -> list[dict]:
    """Simulate each policy on the same random batches; one row per (task count, policy).

    ``memory`` and ``gpus`` are the node's, against which tasks' ``memory`` and ``gpus`` are booked.

    Each row: the mean makespan, the mean lower bound, the mean of makespan / lower bound per
    batch and, where ``fifo`` is among ``policies``, the geometric-mean speedup over it.
    """
    domains = [d.cpus for d in topology.domains]
    rows = []
    for count in counts:
        makespans: dict[str, list[float]] = {p: [] for p in policies}
        bounds = []
        for repeat in range(repeats):
            batch = pick_batch(pool, count, random.Random(seed * 1_000_003 + count * 1009 + repeat))
            for policy in policies:
                result = simulate(batch, domains, llc_size, policy, model=model, seed=seed + repeat, memory=memory,
                                  gpus=gpus)
                makespans[policy].append(result.makespan)
            bounds.append(result.lower_bound)
        reference = makespans.get("fifo")
        for policy in policies:
            row = {
                "tasks": count,
                "policy": policy,
                "repeats": repeats,
                "mean_makespan": statistics.fmean(makespans[policy]),
                "mean_lower_bound": statistics.fmean(bounds),
                "over_lower_bound": statistics.fmean(m / b for m, b in zip(makespans[policy], bounds)),
            }
            if reference:
                row["speedup_vs_fifo"] = statistics.geometric_mean(
                    [f / m for f, m in zip(reference, makespans[policy])]
                )
            rows.append(row)
    return rows
