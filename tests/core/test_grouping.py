import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor import group_tasks
from scalpel_executor.core.grouping import expected_group_count, group_for_domains


def paper_group_count(tasks, processors, cores):
    """Algorithm 1's G: T, P, or G1 + G2 with padding-only groups dropped."""
    if tasks <= processors:
        return tasks
    if tasks <= processors * cores:
        return processors
    rounds = tasks // (processors * cores)
    head = tasks - rounds * processors * cores
    return min(processors, head) + rounds * processors


def test_paper_example_13_tasks_on_2x4():
    groups = group_tasks(list(range(13, 0, -1)), 2, 4)
    assert sorted(len(g) for g in groups) == [2, 3, 4, 4]


def test_basic_case_pairs_largest_with_smallest():
    footprints = [50, 10, 80, 30, 70, 20, 60, 40]  # T = P·C = 8
    groups = group_tasks(footprints, 2, 4)
    largest, smallest = footprints.index(80), footprints.index(10)
    assert groups[0][:2] == [largest, smallest] or {largest, smallest} <= set(groups[0])
    assert {largest, smallest} <= set(groups[0])


def test_basic_case_balances_summed_footprint():
    footprints = [8, 7, 6, 5, 4, 3, 2, 1]
    groups = group_tasks(footprints, 2, 4)
    assert [sorted(footprints[i] for i in g) for g in groups] == [[1, 3, 6, 8], [2, 4, 5, 7]]
    assert {sum(footprints[i] for i in g) for g in groups} == {18}


def test_few_tasks_run_one_per_processor():
    assert group_tasks([3.0, 9.0], 4, 8) == [[1], [0]]


def test_padding_only_groups_are_dropped():
    # 17 tasks on 2x4: the head part has one real task; its padded partner group is empty.
    groups = group_tasks(list(range(17)), 2, 4)
    assert all(groups)
    assert len(groups) == paper_group_count(17, 2, 4) == 5


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(0, 1e9, allow_nan=False), max_size=200),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_grouping_invariants(footprints, processors, cores):
    groups = group_tasks(footprints, processors, cores)
    members = [i for g in groups for i in g]
    assert sorted(members) == list(range(len(footprints)))  # each task exactly once
    assert all(1 <= len(g) <= cores for g in groups)
    assert len(groups) == paper_group_count(len(footprints), processors, cores)
    assert expected_group_count(len(footprints), processors, cores) == len(groups)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.lists(st.floats(0, 1e6), max_size=80))
def test_unequal_domains_respect_capacities(cores_per_domain, footprints):
    groups = group_for_domains(footprints, cores_per_domain)
    assert sorted(i for g in groups for i in g) == list(range(len(footprints)))
    assert all(len(g) <= max(cores_per_domain) for g in groups)
    if len(footprints) <= sum(cores_per_domain):
        assert len(groups) <= len(cores_per_domain)
        # each group fits the domain it was formed for
        for size, cap in zip(sorted((len(g) for g in groups), reverse=True), sorted(cores_per_domain, reverse=True)):
            assert size <= cap


def test_equal_capacities_are_the_paper_algorithm():
    footprints = [float(x) for x in [5, 9, 1, 7, 3, 8, 2, 6, 4, 10, 11]]
    assert group_for_domains(footprints, [4, 4]) == group_tasks(footprints, 2, 4)


@pytest.mark.parametrize(
    "footprints, message",
    [([1, -3], r"footprint\[1\].*-3"), ([math.nan], r"footprint\[0\].*nan"), ([math.inf], "footprint"), (["x"], "footprint")],
)
def test_bad_footprints_name_the_value(footprints, message):
    with pytest.raises(ValueError, match=message):
        group_tasks(footprints, 2, 4)


@pytest.mark.parametrize("processors, cores", [(0, 4), (2, 0), (-1, 4), (2, 1.5)])
def test_bad_machine_shape(processors, cores):
    with pytest.raises(ValueError, match="positive whole number"):
        group_tasks([1, 2, 3], processors, cores)
