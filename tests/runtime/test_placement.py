"""The driver's placement rule in provider mode (runtime.placement): pure, so tested on numbers."""

import random

from scalpel_executor.runtime.placement import NodeRoom, place


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
