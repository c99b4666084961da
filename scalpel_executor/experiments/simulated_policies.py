"""Scheduling policies compared in the simulator, every policy on the same random batches.

``scalpel simulate`` prints this comparison for one machine; ``benchmarks/scale.py`` runs it for
machines this one cannot show, and the simulated studies (``benchmarks/archive/policy_study.py``,
``tail_search.py``, ``workflow_study.py``) draw their batches and estimate errors here (their
machines and pools: :mod:`scalpel_executor.experiments.study_machines`). Pure: the batches come from a seeded generator, so a (seed, task count,
repetition) names the same batch in every run, every study and for every policy.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Sequence

from scalpel_executor.core.simulate import ContentionModel, SimTask, simulate
from scalpel_executor.core.domains import Topology

def batch_seed(seed: int, count: int, repeat: int) -> int:
    """The generator seed of batch ``repeat`` of ``count`` tasks: one formula for every study."""
    return seed * 1_000_003 + count * 1009 + repeat


def pick_batch(pool: Sequence[SimTask], count: int, rng: random.Random) -> list[SimTask]:
    """``count`` tasks in a random submission order: a sample, with repeats only past the pool."""
    if count <= len(pool):
        return rng.sample(list(pool), count)
    return [rng.choice(pool) for _ in range(count)]


def batch_for(pool: Sequence[SimTask], count: int, repeat: int, seed: int) -> list[SimTask]:
    """Batch ``repeat`` of ``count`` tasks for ``seed``: the one :func:`compare_policies` draws."""
    return pick_batch(pool, count, random.Random(batch_seed(seed, count, repeat)))


def with_estimates(batch: list[SimTask], noise: float, rng: random.Random, spread: float | None = None
                   ) -> list[SimTask]:
    """The batch with run-time estimates off by a log-normal factor exp(N(0, noise)), one draw per
    distinct task (a profile's error belongs to the task, not to each copy), and the schedulers
    told that their estimates spread by ``spread`` (default: ``noise``, as a profile store's
    run-time std / mean would tell them; 0: told nothing, the plan trusts its estimates)."""
    if noise <= 0:
        return batch
    spread = noise if spread is None else spread
    factors: dict[int, float] = {}
    out = []
    for t in batch:
        if id(t) not in factors:
            factors[id(t)] = math.exp(rng.gauss(0.0, noise))
        out.append(dataclasses.replace(t, runtime_estimate=t.solo_time * factors[id(t)], runtime_spread=spread))
    return out


def gmean(values) -> float:
    """The geometric mean of positive ``values``."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


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
            batch = batch_for(pool, count, repeat, seed)
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
