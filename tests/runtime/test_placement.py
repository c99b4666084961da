"""The driver's placement rule in provider mode (runtime.driver.placement): pure, so tested on numbers."""

import random
from collections.abc import Hashable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.runtime.driver.placement import NodeRoom, place


def reference_place(footprints: Sequence[float], nodes: Sequence[NodeRoom]) -> list[Hashable | None]:
    """The rule as first written: every node with room compared for every task, O(tasks × nodes).

    ``place`` must return what this returns; it is kept here only as the specification.
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


def test_heavy_tasks_go_to_different_nodes_paired_with_light_ones():
    nodes = [NodeRoom("a", 2, 2, 0.0), NodeRoom("b", 2, 2, 0.0)]
    assert place([30e6, 1e6, 20e6, 2e6], nodes) == ["a", "a", "b", "b"]  # a: 30 + 1, b: 20 + 2


def test_load_is_counted_per_slot_so_a_bigger_node_takes_more():
    nodes = [NodeRoom("small", 1, 4, 0.0), NodeRoom("big", 4, 4, 0.0)]
    placed = place([10e6] * 5, nodes)
    assert placed.count("big") == 4 and placed.count("small") == 1


def test_a_node_that_already_holds_heavy_work_gets_the_next_heavy_task_last():
    nodes = [NodeRoom("busy", 2, 1, 50e6), NodeRoom("new", 2, 2, 0.0)]
    assert place([40e6, 1e6], nodes) == ["new", "new"]  # busy: (50 + 1) / 2 > new: (40 + 1) / 2


def test_without_room_the_lightest_tasks_wait_and_nothing_is_over_dealt():
    rng = random.Random(7)
    for _ in range(200):
        nodes = [NodeRoom(i, rng.randint(1, 8), rng.randint(0, 4), rng.random() * 1e8)
                 for i in range(rng.randint(1, 5))]
        footprints = [rng.random() * 1e8 for _ in range(rng.randint(0, 20))]
        placed = place(footprints, nodes)
        room = {node.key: node.room for node in nodes}
        for key in room:
            assert placed.count(key) <= room[key]
        assert sum(key is not None for key in placed) == min(len(footprints), sum(room.values()))
        waiting = [f for f, key in zip(footprints, placed) if key is None]
        dealt = [f for f, key in zip(footprints, placed) if key is not None]
        assert not waiting or not dealt or max(waiting) <= min(dealt)


# Few distinct values, so that ties are common: equal footprints, equal loads, equal shares, zeros,
# and loads that differ by less than a task rounds away (1e-12, 1e-9, 1e-8 beside 0 under 1e9).
FEW = [0.0, 1e-12, 1e-9, 1e-8, 1.0, 1e6, 2e6, 3e6, 1e9]
footprints_strategy = st.lists(st.one_of(st.sampled_from(FEW), st.floats(0, 1e12),
                                         st.floats(allow_nan=False, allow_infinity=False)), max_size=40)
node_strategy = st.builds(
    NodeRoom,
    key=st.integers(0, 30),  # repeats now and then: the last entry of a key counts
    slots=st.integers(-1, 6),  # 0 and below are counted as 1
    room=st.integers(-1, 5),  # 0 and below: no room
    load=st.one_of(st.sampled_from(FEW), st.floats(-1e12, 1e12), st.floats(allow_nan=False, allow_infinity=False)))


@settings(max_examples=500, deadline=None)
@given(footprints_strategy, st.lists(node_strategy, max_size=16))
def test_place_assigns_exactly_as_comparing_every_node(footprints, nodes):
    assert place(footprints, nodes) == reference_place(footprints, nodes)


def test_a_load_that_rounds_to_the_same_share_still_yields_to_more_room():
    nodes = [NodeRoom("a", 1, 1, 0.0), NodeRoom("b", 1, 2, 1e-9)]  # 1e9 + 1e-9 == 1e9: equal shares
    assert place([1e9], nodes) == reference_place([1e9], nodes) == ["b"]
    # Seven loads with one share under a 1e9 task; the one with more room is the greatest of them.
    nodes = [NodeRoom(load, 1, 1, load) for load in (0.0, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8)]
    nodes.append(NodeRoom("roomy", 1, 2, 2e-8))
    assert place([1e9], nodes) == reference_place([1e9], nodes) == ["roomy"]
