"""A key's family (core.widths.SpeedupModel.join): the keys of one app whose calls differ in an
argument's value. A key with no speed-up reading of its own borrows the family's, so a parameter
sweep, one key per value, learns from each of its runs instead of none."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor.core import widths
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.widths import BORROWED, SURE_AFTER, SpeedupModel, Widths, shrunk

MiB = 2**20


def test_a_key_with_no_reading_borrows_its_familys_mean_as_sure_as_the_family_and_its_own_reading_replaces_it():
    model = SpeedupModel()
    model.join("relax(~0.3)", "relax", 0.1, 4)  # four readings of 0.1 in earlier runs, over any keys of it
    model.join("relax(~0.5)", "relax", 0.9, 40)  # a second join does not seed the family again
    assert model.readings("relax(~0.3)") == BORROWED == SURE_AFTER  # a family sure of its speed-up: so is its key
    assert model.serial_fraction("relax(~0.3)") == pytest.approx(shrunk(0.1 * BORROWED, BORROWED))
    assert model.readings("other") == 0 and model.serial_fraction("other") == 1.0  # no family: no gain
    model.observe("relax(~0.5)", 1, 2, 1.0)  # no speed-up at all: reads 1.0, for its key and its family
    assert model.readings("relax(~0.5)") == 1 and model.serial_fraction("relax(~0.5)") == pytest.approx(1.0)
    assert model.serial_fraction("relax(~0.3)") == pytest.approx(shrunk((0.4 + 1.0) / 5 * BORROWED, BORROWED))
    model.join("relax(~0.7)", "relax")
    assert model.readings("relax(~0.7)") == BORROWED  # a key joining later borrows what the family read so far
    model.join("fit(~8)", "fit", 0.2, 1)
    assert model.readings("fit(~8)") == 1  # a family of one reading lends one: not sure, still explored


def test_a_family_seed_is_checked_as_a_keys_is():
    for serial, readings in ((1.5, 2), (0.1, -1)):
        with pytest.raises(ValueError, match="serial fraction in"):
            SpeedupModel().join("k", "f", serial, readings)


@given(st.lists(st.floats(0, 1), max_size=6), st.lists(st.floats(0, 1), max_size=6))
def test_a_reading_added_counts_for_its_key_and_its_family_and_own_is_the_keys_alone(mine, others):
    """The driver's estimator adds the readings the node's scheduler took (``add``); ``own`` is
    what it sends the scheduler as the key's seed, the family's borrowed mean never in it."""
    model = SpeedupModel()
    assert not model.knows("relax(~0.3)") and not model.joined("relax(~0.3)")
    model.join("relax(~0.3)", "relax")
    model.join("relax(~0.5)", "relax")
    for reading in others:
        model.add("relax(~0.5)", reading)
    assert model.own("relax(~0.3)") is None and not model.knows("relax(~0.3)")
    assert model.readings("relax(~0.3)") == min(len(others), BORROWED)
    for reading in mine:
        model.add("relax(~0.3)", reading)
    if mine:
        mean, count = model.own("relax(~0.3)")
        assert count == len(mine) and mean == pytest.approx(sum(mine) / len(mine))
        assert model.serial_fraction("relax(~0.3)") == pytest.approx(shrunk(sum(mine), len(mine)))
    family = others + mine  # the family holds every reading of its keys
    if not mine:
        assert model.serial_fraction("relax(~0.3)") == pytest.approx(
            shrunk(*widths.borrowed(sum(family), len(family))))


def test_a_reading_out_of_range_is_refused_by_name():
    for reading in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="serial fraction in"):
            SpeedupModel().add("k", reading)


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.floats(0.0, 1.0))
def test_a_borrowing_key_rests_on_the_familys_mean_until_it_reads_one_of_its_own(readings, own):
    model = SpeedupModel()
    for i, reading in enumerate(readings):
        model.join(f"k{i}", "family")
        model.seed(f"k{i}", reading, 1)  # a key's own store readings are its own, not its family's
    model.join("new", "family")
    assert model.readings("new") == 0  # the family started from nothing in the store
    for i, reading in enumerate(readings):
        model.observe(f"k{i}", 1, 4, widths.amdahl(reading, 4))  # this run's readings reach the family
    mean = sum(readings) / len(readings)
    worth = min(len(readings), BORROWED)
    assert model.readings("new") == worth
    assert model.serial_fraction("new") == pytest.approx(shrunk(mean * worth, worth), abs=1e-9)
    model.observe("new", 1, 4, widths.amdahl(own, 4))
    assert model.readings("new") == 1
    assert model.serial_fraction("new") == pytest.approx(shrunk(own, 1), abs=1e-9)


def _sweep(values: range, tag: str, family: bool) -> list[SimTask]:
    """A parameter sweep: one task per value, each its own key, all of one kernel (s = 0.05)."""
    return [SimTask(f"{tag}{i}", 4.0, 2 * MiB, max_cores=4, serial_fraction=0.05, key=f"relax(~{tag}{i})",
                    family="relax" if family else None) for i in values]


@pytest.mark.parametrize("family", [False, True])
def test_a_sweep_of_new_values_learns_from_the_last_run_only_through_its_family(family):
    """A first sweep of 12 values on 8 cores, then a second sweep of 12 other values with the same
    rule: every key of the second is new. Without a family it starts again from nothing (tasks
    narrow for ``no speed-up learned``); with one, its keys borrow what the first sweep read."""
    domains = [[0, 1, 2, 3], [4, 5, 6, 7]]
    rule = Widths("scalpel")
    simulate(_sweep(range(12), "a", family), domains, 32 * MiB,
             scheduler=Scheduler(domains, "scalpel", llc=32 * MiB, width_rule=rule))
    second = Scheduler(domains, "scalpel", llc=32 * MiB, width_rule=rule)
    result = simulate(_sweep(range(12), "b", family), domains, 32 * MiB, scheduler=second)
    assert len(result.records) == 12
    if family:
        assert second.width_reasons[widths.NO_SPEEDUP] == 0
        assert all(rule.model.readings(f"relax(~b{i})") >= 1 for i in range(12))
    else:
        assert second.width_reasons[widths.NO_SPEEDUP] > 0


def test_tasks_without_a_family_are_simulated_as_before():
    """The family changes nothing where every key already has its own readings or none shares one."""
    domains = [[0, 1, 2, 3]]
    tasks = [SimTask(f"t{i}", 2.0 + i, 4 * MiB, max_cores=4, serial_fraction=0.1, key="fft") for i in range(6)]
    plain = simulate(tasks, domains, 12 * MiB)
    joined = simulate([dataclasses.replace(t, family="fft-family") for t in tasks], domains, 12 * MiB)
    assert [(r.name, r.start, r.cores) for r in plain.records] == [(r.name, r.start, r.cores) for r in joined.records]
