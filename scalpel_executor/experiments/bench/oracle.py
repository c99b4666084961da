"""The oracle order of a contention mix: the submission order under which first-come-first-served
finishes soonest on one domain, found by exhaustive search in the contention model. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations, permutations

from scalpel_executor.core.simulate import SimTask, simulate


def oracle_order(cases: Sequence, seconds: Sequence[float], cores: int, llc: float, model=None,
                 max_candidates: int = 50_000) -> tuple:
    """The submission order under which first-come-first-served finishes ``cases`` soonest on one
    domain of ``cores`` cores, by exhaustive search in the contention model.

    Candidates: every order while there are at most ``max_candidates`` (8 cases: 40,320);
    otherwise every placement of the large cases (footprint above a core's share of ``llc``)
    among the small ones, each class longest first or shortest first; beyond ``max_candidates``
    placements, one large case then ``cores - 1`` small ones, repeated. Each candidate is
    simulated with the ``fifo`` policy (the scheduler the live executor runs) and the shortest
    simulated makespan wins. Pure; O(candidates x simulation): about 8 s for 8 cases.
    """
    n = len(cases)
    large = [i for i in range(n) if cases[i].footprint_bytes > llc / cores]
    small = [i for i in range(n) if i not in large]
    domains = [list(range(cores))]

    def makespan(order: Sequence[int]) -> float:
        tasks = [SimTask(str(i), seconds[i], cases[i].footprint_bytes) for i in order]
        return simulate(tasks, domains, llc, "fifo", model=model).makespan

    def merged(slots: Sequence[int], big: list[int], little: list[int]) -> list[int]:
        big, little, chosen = list(big), list(little), set(slots)
        return [big.pop(0) if k in chosen else little.pop(0) for k in range(n)]

    if math.factorial(n) <= max_candidates:  # small mixes: every order
        best = min(permutations(range(n)), key=makespan)
        return tuple(cases[i] for i in best)
    if math.comb(n, len(large)) > max_candidates:
        order, rest = [], list(small)
        for i in large:
            order.append(i)
            order.extend(rest[:cores - 1])
            rest = rest[cores - 1:]
        return tuple(cases[i] for i in order + rest)
    best, best_time = None, math.inf
    for descending in (True, False):
        big = sorted(large, key=lambda i: seconds[i], reverse=descending)
        little = sorted(small, key=lambda i: seconds[i], reverse=descending)
        for slots in combinations(range(n), len(large)):
            order = merged(slots, big, little)
            time_taken = makespan(order)
            if time_taken < best_time - 1e-12:
                best, best_time = order, time_taken
    return tuple(cases[i] for i in best)
