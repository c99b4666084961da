"""Workflow shapes from WfCommons' WfChef recipes, as simulated DAGs (the ``workflows`` extra)."""

from __future__ import annotations

import random
import socket
from collections import Counter

import pytest

pytest.importorskip("wfcommons", reason="the workflows extra (WfCommons) is not installed")

from scalpel_executor.core.machines import MACHINES  # noqa: E402
from scalpel_executor.core.simulate import Batching, simulate  # noqa: E402
from scalpel_executor.experiments.workflows import SHAPES, STUDY_SHAPES, task_type, workflow  # noqa: E402

MiB = 2**20


@pytest.fixture
def offline(monkeypatch):
    """No connection can be opened: generation must not need the network."""
    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_generates_offline_at_its_minimum_with_a_footprint_for_every_task_type(shape, offline):
    tasks = workflow(shape, SHAPES[shape].minimum, seed=1)
    assert len(tasks) == SHAPES[shape].minimum
    assert {task_type(t) for t in tasks} <= set(SHAPES[shape].footprints)
    assert any(t.parents for t in tasks) and any(not t.parents for t in tasks)
    paper = MACHINES["paper"].topology()
    result = simulate(tasks, [d.cpus for d in paper.domains], paper.llc_size, "longest_first", batching=Batching())
    record = {r.name: r for r in result.records}
    assert len(record) == len(tasks)
    for task in tasks:
        assert all(record[task.name].start >= record[tasks[p].name].end - 1e-9 for p in task.parents)


def test_montage_at_its_trace_size_is_that_trace_three_bands_of_a_mosaic():
    tasks = workflow("montage")
    assert len(tasks) == SHAPES["montage"].typical == 472
    types = Counter(task_type(t) for t in tasks)
    assert types["mBgModel"] == types["mAdd"] == 3 and types["mViewer"] == 4  # one per band, and the colour image
    assert types["mProject"] == types["mBackground"]
    by_type = {task_type(t): t.footprint for t in tasks}
    assert by_type["mProject"] == 15 * MiB and by_type["mDiffFit"] == 3 * MiB and by_type["mBgModel"] == 137 * MiB
    project = {i for i, t in enumerate(tasks) if task_type(t) == "mProject"}
    assert all(set(t.parents) <= project and t.parents for t in tasks if task_type(t) == "mDiffFit")


def test_a_seed_names_one_instance_and_the_callers_random_state_is_left_alone():
    import numpy

    random.seed(7)
    numpy.random.seed(7)
    expected = random.random(), numpy.random.random()
    random.seed(7)
    numpy.random.seed(7)
    first = workflow("1000genome", seed=3)
    assert (random.random(), numpy.random.random()) == expected
    assert workflow("1000genome", seed=3) == first
    other = workflow("1000genome", seed=4)
    assert [t.parents for t in other] == [t.parents for t in first]  # the trace's graph at its size
    assert [t.solo_time for t in other] != [t.solo_time for t in first]  # run times drawn anew


def test_sizes_and_names_that_cannot_be_made_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"the soykb recipe generates at least 96 tasks .* got tasks=50; ask for 96"):
        workflow("soykb", 50)
    with pytest.raises(ValueError, match="unknown workflow shape 'montag'; choose from montage, "):
        workflow("montag")
    assert set(STUDY_SHAPES) <= set(SHAPES)
