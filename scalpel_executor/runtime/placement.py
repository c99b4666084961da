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
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

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
        The managers that may take tasks.

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
    O(T log T + T·N) for T tasks and N nodes.
    """
    load = {node.key: node.load for node in nodes}
    room = {node.key: node.room for node in nodes}
    slots = {node.key: max(1, node.slots) for node in nodes}
    order = {node.key: index for index, node in enumerate(nodes)}
    result: list[Hashable | None] = [None] * len(footprints)
    for index in sorted(range(len(footprints)), key=lambda i: -footprints[i]):
        candidates = [key for key in load if room[key] > 0]
        if not candidates:
            break
        footprint = footprints[index]
        best = min(candidates, key=lambda key: ((load[key] + footprint) / slots[key], -room[key], order[key]))
        result[index] = best
        load[best] += footprint
        room[best] -= 1
    return result
