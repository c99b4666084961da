"""Which node manager gets which task: the driver's placement rule in provider mode (pure).

The driver does not schedule cores; each manager runs Algorithm 2 on its own node's LLC domains.
What the driver decides is the split: which tasks go to which node, so that every node's share
holds a similar mix of heavy and light footprints. The rule is Algorithm 1's idea (pair large with
small so that every group's summed footprint is about equal) applied with nodes as the groups:

    heaviest task first, each to the node whose footprint per slot, counting this task, is the
    least among nodes with room (ties: the node with more room, then the earlier node).

A node's load is the summed footprint of the tasks it holds (sent, not yet finished). Dividing by
slots makes a 16-core node take proportionally more than a 4-core one. A node's room is its slots
plus its prefetch minus what it holds, so a node that joins mid-run has the most room and the
least load and takes the next tasks.

The rule is computed without comparing every node for every task: among nodes of one slot count,
the share (load + footprint) / slots never falls as the load grows, so each slot count keeps its
nodes by load (`_SameSlots`) and a task reads only the least loads of each slot count.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush

__all__ = ["NodeRoom", "place"]


@dataclass(frozen=True)
class NodeRoom:
    """One node manager as the rule sees it."""

    key: Hashable
    slots: int  # workers (cores) it schedules for, > 0
    room: int  # tasks it may still be sent now (slots + prefetch - held)
    load: float  # summed footprint (bytes) of the tasks it holds


def place(footprints: Sequence[float], nodes: Sequence[NodeRoom]) -> list[Hashable | None]:
    """The node each task goes to (its key), or None for a task no node has room for.

    Parameters
    ----------
    footprints : sequence of float
        The tasks' footprint estimates, in the order the caller would send them.
    nodes : sequence of NodeRoom
        The managers that may take tasks. Keys are unique; were one repeated, its last entry
        would count.

    Returns
    -------
    list
        ``result[i]`` is the key of the node task ``i`` goes to. When there is less room than
        tasks, the lightest tasks are the ones left (None) for a later call.

    Example
    -------
    >>> place([30e6, 1e6, 20e6, 2e6], [NodeRoom("a", 2, 2, 0.0), NodeRoom("b", 2, 2, 0.0)])
    ['a', 'a', 'b', 'b']

    Notes
    -----
    O(T log T + T·(S + log N)) for T tasks, N nodes and S distinct slot counts (1 on a uniform
    cluster), plus the loads whose share rounds to the least one; comparing every node with room
    for every task was O(T·N). Measured alone, 110 tasks a call: 2.0 µs/task at 64 nodes against
    21 for that scan, 5.3 at 512 against 162; a call costs about 2 µs more to set up, which shows
    at 1 node, where the hub places about 2 tasks a call (docs/notebook.md, "The driver's
    dispatch capacity").

    Each slot count is a :class:`_SameSlots`. A task takes the best offer of each (a few float
    operations), and the node it goes to moves to its new load (two heap operations). The
    assignment is the one of comparing every node, (share, more room, earlier node), for any
    finite footprints and loads: tests/runtime/test_placement.py checks it against that scan.
    """
    position = {node.key: index for index, node in enumerate(nodes)}  # a repeated key: its last entry
    key_at = {index: key for key, index in position.items()}
    load = [node.load for node in nodes]
    room = [node.room for node in nodes]
    members: dict[int, list[int]] = {}
    for index in key_at:
        if room[index] > 0:
            members.setdefault(max(1, nodes[index].slots), []).append(index)
    groups = [_SameSlots(slots, [(load[index], room[index], index) for index in indices])
              for slots, indices in members.items()]
    group_of = {index: group for group, indices in zip(groups, members.values()) for index in indices}
    with_room = len(group_of)
    result: list[Hashable | None] = [None] * len(footprints)
    for task in sorted(range(len(footprints)), key=lambda i: -footprints[i]):
        if not with_room:
            break
        footprint = footprints[task]
        best = None
        for group in groups:
            offer = group.offer(footprint)
            if offer is not None and (best is None or offer < best):
                best = offer
        chosen = best[2]
        before = load[chosen]
        load[chosen] += footprint
        room[chosen] -= 1
        group_of[chosen].move(chosen, before, load[chosen], room[chosen])
        if not room[chosen]:
            with_room -= 1
        result[task] = key_at[chosen]
    return result


class _SameSlots:
    """The nodes with room that have one slot count, ordered so that a task reads only the least loads.

    ``loads`` is a heap of their distinct loads, each once, and ``nodes_at[load]`` a heap of
    ``(-room, position)`` of the nodes at that load, so its top is the one the rule prefers among
    equal shares. A load no node has any more keeps an empty heap until it reaches the top: a
    load that comes back (a task of footprint 0) must not enter ``loads`` twice.

    Why not one heap of nodes by (load, -room, position): the rule compares shares, not loads,
    and rounding gives different loads the same share (a load of 1e-9 and one of 0 under a 1e6
    task), where the rule prefers more room. The loads with the least share are the least ones,
    a subtree at the heap's top; :meth:`offer` reads them all, nearly always the top alone.
    """

    def __init__(self, slots: int, nodes: list[tuple[float, int, int]]):
        """``nodes``: ``(load, room, position)`` of each, room above 0."""
        self.slots = slots
        self.nodes_at: dict[float, list[tuple[int, int]]] = {}
        for load, room, position in nodes:
            self.nodes_at.setdefault(load, []).append((-room, position))
        for at in self.nodes_at.values():
            heapify(at)
        self.loads = list(self.nodes_at)
        heapify(self.loads)

    def move(self, position: int, before: float, after: float, room: int) -> None:
        """The node :meth:`offer` chose at load ``before`` now has load ``after`` and ``room`` (0: none)."""
        heappop(self.nodes_at[before])
        if room > 0:
            at = self.nodes_at.get(after)
            if at is None:
                at = self.nodes_at[after] = []
                heappush(self.loads, after)
            heappush(at, (-room, position))

    def offer(self, footprint: float) -> tuple[float, int, int] | None:
        """``(share, -room, position)`` of this slot count's best node for the task, or None if none has room."""
        loads, nodes_at, slots = self.loads, self.nodes_at, self.slots
        while loads and not nodes_at[loads[0]]:
            del nodes_at[heappop(loads)]
        if not loads:
            return None
        least = (loads[0] + footprint) / slots
        best = nodes_at[loads[0]][0]
        size = len(loads)
        if size > 1 and ((loads[1] + footprint) / slots == least
                         or size > 2 and (loads[2] + footprint) / slots == least):
            best = self._best_of_equal_shares(footprint, least, best)
        return least, best[0], best[1]

    def _best_of_equal_shares(self, footprint: float, least: float, best: tuple[int, int]) -> tuple[int, int]:
        """The best ``(-room, position)`` among every load below the top whose share is ``least``."""
        loads, nodes_at, slots = self.loads, self.nodes_at, self.slots
        below = [1, 2]  # a heap entry is never less than its parent, nor is its share
        while below:
            index = below.pop()
            if index < len(loads) and (loads[index] + footprint) / slots == least:
                at = nodes_at[loads[index]]
                if at and at[0] < best:
                    best = at[0]
                below += (2 * index + 1, 2 * index + 2)
        return best
