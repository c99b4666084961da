"""Scheduling policies: pure functions from the tasks of one priority level to ordered groups.

Each policy takes ``(tasks, context)`` (:class:`~scalpel_executor.core.planning.PlanContext`: the
cores of each domain, a seeded ``rng`` and, for the model-checked default, the LLC size, the
contention model and a planning budget) and returns the groups to dispatch, in order
(:class:`~scalpel_executor.core.tasks.Group`: tasks meant to co-run on one LLC domain, in the order
they should start). :data:`POLICIES` names them; docs/design.md compares them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from scalpel_executor.core.grouping import group_with_capacities
from scalpel_executor.core.planning import PlanContext, plan_scalpel
from scalpel_executor.core.tasks import Group, Task

PlanFunction = Callable[[list[Task], PlanContext], list[Group]]


def _alg1_groups(tasks: list[Task], cores_per_domain: Sequence[int]) -> list[Group]:
    """Algorithm 1's groups, each holding at most its domain's cores' worth of tasks: with tasks of
    several cores, a group formed over its capacity gives up its widest tasks (the lightest of
    those first), which are grouped again the same way, until every group fits (a task wider than
    its domain stays alone). With one-core tasks this is exactly the paper's grouping."""
    groups: list[Group] = []
    while tasks:
        overflow: list[Task] = []
        for members, capacity in group_with_capacities([t.footprint for t in tasks], cores_per_domain):
            group = [tasks[i] for i in members]
            while len(group) > 1 and sum(t.cores for t in group) > capacity:
                widest = max(group, key=lambda t: (t.cores, -t.footprint, t.seq))
                group.remove(widest)
                overflow.append(widest)
            groups.append(Group(group, capacity))
        tasks = overflow
    return groups


def _singletons(tasks: Iterable[Task]) -> list[Group]:
    return [Group([t], 1) for t in tasks]


def plan_scalpel_paper(tasks, context):
    """The published Scalpel: Algorithm 1 groups; full before partial, longest group first,
    longest task first (Algorithm 2)."""
    groups = _alg1_groups(tasks, context.cores_per_domain)
    for group in groups:
        group.tasks.sort(key=lambda t: (-t.runtime, t.seq))
    groups.sort(key=lambda g: (not g.full, -g.runtime, min(t.seq for t in g.tasks)))
    return groups


def plan_scalpel_lpt(tasks, context):
    """Algorithm 1 groups, every group ordered by its longest task; fullness only breaks ties."""
    groups = _alg1_groups(tasks, context.cores_per_domain)
    for group in groups:
        group.tasks.sort(key=lambda t: (-t.runtime, t.seq))
    groups.sort(key=lambda g: (-g.runtime, not g.full, min(t.seq for t in g.tasks)))
    return groups


def plan_longest_first(tasks, context):
    """LPT without grouping: the longest waiting task goes to whichever core frees first; with
    tasks of several cores, the largest area (run time × cores) first."""
    return _singletons(sorted(tasks, key=lambda t: (-t.runtime * t.cores, t.seq)))


def plan_grouping_fifo(tasks, context):
    """Algorithm 1 groups, dispatched in submission order (of each group's earliest task)."""
    groups = _alg1_groups(tasks, context.cores_per_domain)
    for group in groups:
        group.tasks.sort(key=lambda t: t.seq)
    groups.sort(key=lambda g: g.tasks[0].seq)
    return groups


def plan_fifo(tasks, context):
    """Submission order, any free core: what a plain task queue does."""
    return _singletons(sorted(tasks, key=lambda t: t.seq))


def plan_random(tasks, context):
    """A seeded random order, any free core."""
    shuffled = sorted(tasks, key=lambda t: t.seq)
    context.rng.shuffle(shuffled)
    return _singletons(shuffled)


def plan_di(tasks, context):
    """Distributed Intensity (Zhuravlev et al., ASPLOS 2010): spread intensity over the domains.

    Tasks are ranked by intensity (LLC miss rate where measured, footprint otherwise), most
    intensive first, and dealt round-robin over the domains (in proportion to their cores), so
    each domain gets a similar mix. Each domain then runs its share in submission order.
    """
    cores_per_domain = context.cores_per_domain
    ranked = sorted(tasks, key=lambda t: (-(t.intensity if t.intensity is not None else t.footprint), t.seq))
    turns = [d for round_ in range(max(cores_per_domain)) for d, c in enumerate(cores_per_domain) if round_ < c]
    shares: list[list[Task]] = [[] for _ in cores_per_domain]
    wide: list[Task] = []  # wider than every domain: it spans several, so no domain is its own
    position = 0
    for task in ranked:
        if task.cores > max(cores_per_domain):
            wide.append(task)
            continue
        # A task is dealt only to a domain that can hold its cores: one pinned where it never
        # fits would wait forever, and every task dealt behind it with it.
        while cores_per_domain[turns[position % len(turns)]] < task.cores:
            position += 1
        shares[turns[position % len(turns)]].append(task)
        position += 1
    groups = []
    for domain, share in enumerate(shares):
        if share:
            share.sort(key=lambda t: t.seq)
            groups.append(Group(share, cores_per_domain[domain], domain=domain))
    if wide:
        groups.append(Group(sorted(wide, key=lambda t: t.seq), max(cores_per_domain)))
    return groups


class _Policies(dict):
    """Policy name -> plan function; an old name in :data:`POLICY_ALIASES` is found too, but not listed."""

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, POLICY_ALIASES.get(name, name))

    def __getitem__(self, name) -> PlanFunction:
        return dict.__getitem__(self, POLICY_ALIASES.get(name, name))


#: The policy a scheduler, the simulator and the executor use unless told otherwise.
DEFAULT_POLICY = "scalpel"
#: Names users typed before a policy was renamed: ``longer_first`` is longest-first.
POLICY_ALIASES = {"longer_first": "longest_first"}

POLICIES: dict[str, PlanFunction] = _Policies({
    "scalpel": plan_scalpel,
    "scalpel-paper": plan_scalpel_paper,
    "scalpel-lpt": plan_scalpel_lpt,
    "longest_first": plan_longest_first,
    "grouping+fifo": plan_grouping_fifo,
    "fifo": plan_fifo,
    "random": plan_random,
    "di": plan_di,
})


def resolve_policy(name: str) -> PlanFunction:
    """The plan function of a policy name; ValueError listing the valid names otherwise."""
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown scheduling policy {name!r}; choose one of: {', '.join(POLICIES)}"
        ) from None
