"""Contention-balanced task grouping: Algorithm 1 of the Scalpel paper.

Tasks are sorted by memory footprint and dealt into groups so that every group's summed footprint
(its shared-cache locality, eq. 4) is about equal: in each round of ``grouping_procedure()`` the
next G largest tasks go to the groups in order and the G smallest in inverted order, then the
groups are re-sorted by summed footprint, heaviest first. A group holds at most C tasks (the cores
that share one last-level cache) and runs on one LLC domain.

Unequal domains (e.g. a cpuset that leaves 3 cores of one socket and 1 of another) generalise the
paper by giving each group a *capacity*, the core count of the domain it is formed for, instead of
one C for all: a round deals only to groups that still have room. With equal capacities this is
exactly the paper's procedure. See :func:`group_for_domains`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_EMPTY = -1  # index of a padding ("empty") task, footprint 0


__all__ = ["group_tasks", "group_for_domains", "group_with_capacities", "validate_footprints", "expected_group_count"]


@dataclass
class _Forming:
    capacity: int
    members: list[int] = field(default_factory=list)
    locality: float = 0.0


def validate_footprints(footprints: Iterable[object]) -> list[float]:
    """Return footprints as floats, or raise ValueError naming the first bad one by position."""
    values = []
    for position, value in enumerate(footprints):
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise ValueError(f"footprint[{position}] must be a number of bytes, got {value!r}")
        number = float(value)
        if math.isnan(number) or math.isinf(number) or number < 0:
            raise ValueError(
                f"footprint[{position}] must be a finite non-negative number of bytes, got {value!r}"
            )
        values.append(number)
    return values


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return value


def _grouping_procedure(order: list[int], footprints: list[float], capacities: list[int]) -> list[_Forming]:
    """One ``grouping_procedure()`` of the paper over ``order`` (indices, heaviest first, padded).

    ``sum(capacities) == len(order)``; padding entries are ``_EMPTY``.
    """
    groups = [_Forming(capacity) for capacity in capacities]
    lo, hi = 0, len(order)
    while lo < hi:
        open_groups = [g for g in groups if len(g.members) < g.capacity]
        for group in open_groups:  # top G tasks, in order
            if lo == hi:
                break
            index = order[lo]
            lo += 1
            group.members.append(index)
            if index != _EMPTY:
                group.locality += footprints[index]
        for group in open_groups:  # last G tasks, inverted order: the first group gets the last
            if lo == hi:
                break
            if len(group.members) == group.capacity:
                continue
            hi -= 1
            index = order[hi]
            group.members.append(index)
            if index != _EMPTY:
                group.locality += footprints[index]
        groups.sort(key=lambda g: -g.locality)  # stable: ties keep their order
    return groups


def group_with_capacities(footprints: Sequence[float], capacities: Sequence[int]) -> list[tuple[list[int], int]]:
    """Algorithm 1 over domains of the given core counts; returns ``(members, capacity)`` pairs.

    ``capacities[d]`` is the number of cores of domain d. With P = len(capacities) and
    N = sum(capacities) cores, the paper's three cases become: T ≤ P (one task per group),
    P < T ≤ N (pad to N with empty tasks, one group per domain), and T > N (split at
    k = ⌊T/N⌋·N: the heaviest T − k tasks padded to N, the remaining k tasks into ⌊T/N⌋ groups per
    domain). Groups left with no real task after removing padding are dropped.
    """
    values = validate_footprints(footprints)
    caps = [_positive_int("cores of a domain", c) for c in capacities]
    if not caps:
        raise ValueError("at least one domain (processor) is needed to group tasks, got none")
    processors, total = len(caps), sum(caps)
    count = len(values)
    order = sorted(range(count), key=lambda i: -values[i])  # stable: equal footprints keep submission order

    if count <= processors:
        return [([i], caps[d]) for d, i in enumerate(order)]

    def real(groups: list[_Forming]) -> list[tuple[list[int], int]]:
        out = []
        for g in groups:
            members = [i for i in g.members if i != _EMPTY]
            if members:
                out.append((members, g.capacity))
        return out

    if count <= total:
        return real(_grouping_procedure(order + [_EMPTY] * (total - count), values, caps))

    k = (count // total) * total
    head, tail = order[: count - k], order[count - k :]
    result = []
    if head:
        result += real(_grouping_procedure(head + [_EMPTY] * (total - len(head)), values, caps))
    result += real(_grouping_procedure(tail, values, caps * (count // total)))
    return result


def group_tasks(footprints: Sequence[float], processors: int, cores: int) -> list[list[int]]:
    """Group tasks for co-running on ``processors`` LLC domains of ``cores`` cores (Algorithm 1).

    Parameters
    ----------
    footprints : sequence of float
        Memory footprint of each task (bytes, or any unit used consistently), ≥ 0.
    processors : int
        P, the number of last-level-cache domains (processors / sockets / CCXs).
    cores : int
        C, the number of cores sharing one LLC.

    Returns
    -------
    list of list of int
        The groups, as indices into ``footprints``. Every task is in exactly one group; no group
        has more than ``cores`` tasks. Groups of the heaviest T − k tasks come first (Algorithm 1
        line 23), each part in its final locality order.

    Raises
    ------
    ValueError
        For a negative, NaN or infinite footprint (naming its position), or ``processors`` or
        ``cores`` that is not a positive whole number.

    Examples
    --------
    The paper's example: 13 tasks on 2 processors of 4 cores give groups of 4, 4, 3 and 2 tasks.

    >>> sorted(len(g) for g in group_tasks(range(13, 0, -1), 2, 4))
    [2, 3, 4, 4]
    >>> group_tasks([8, 7, 6, 5, 4, 3, 2, 1], 2, 4)[0][:2]  # largest with smallest
    [0, 7]

    Notes
    -----
    The number of groups is T when T ≤ P, P when P < T ≤ P·C, and otherwise
    min(P, T − k) + ⌊T/(P·C)⌋·P with k = ⌊T/(P·C)⌋·P·C (groups of only padding are dropped).
    Cost O(T log T): one sort of the tasks and ⌈C/2⌉ re-sorts of the groups.

    References
    ----------
    Scalpel (IEEE TC 2024), Section IV-B/C, Algorithm 1 and eq. (4).
    """
    _positive_int("processors", processors)
    _positive_int("cores", cores)
    return [members for members, _ in group_with_capacities(footprints, [cores] * processors)]


def group_for_domains(footprints: Sequence[float], cores_per_domain: Sequence[int]) -> list[list[int]]:
    """Algorithm 1 for domains with possibly unequal core counts (see the module docstring)."""
    return [members for members, _ in group_with_capacities(footprints, cores_per_domain)]


def expected_group_count(tasks: int, processors: int, cores: int) -> int:
    """The number of groups Algorithm 1 forms for ``tasks`` tasks on P×C cores (see group_tasks)."""
    if tasks <= processors:
        return tasks
    if tasks <= processors * cores:
        return processors
    k = (tasks // (processors * cores)) * processors * cores
    return min(processors, tasks - k) + (tasks // (processors * cores)) * processors
