"""What a first run's own runs tell the width rule (core.widths, core.scheduler): a task's end is
reckoned with its key's spread, and a wider run of a key with no speed-up reading teaches the
guessed tasks of its key a run time, never read against."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import widths
from scalpel_executor.core.admission import GUESSED_SPREAD, ONE_RUN_SPREAD
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.core.widths import Outlook, Peer, allot, choose_width

MiB = 2**20


def test_a_task_that_may_run_longer_than_its_estimate_starts_wider_where_its_own_end_would_decide():
    """A 2 s task of a key sure of its speed-up (s = 0.1) beside 6 core-seconds on four cores: at its
    estimate it ends with the rest on one core (``many waiting``); a quarter longer or half again
    as long, it would end the work alone, and it starts wider the more its run times spread."""
    outlook = Outlook(cores=4, domain_cores=4, free=4, backlog=6.0)
    chosen = {spread: choose_width(1, 4, 2.0, 0.0, 0.1, 5, outlook, spread=spread) for spread in (0.0, 0.25, 0.5)}
    assert (chosen[0.0].width, chosen[0.0].reason) == (1, widths.MANY_WAITING)
    assert (chosen[0.25].width, chosen[0.25].reason) == (2, widths.TAIL)
    assert (chosen[0.5].width, chosen[0.5].reason) == (4, widths.TAIL)
    # what it spends is reckoned at its estimate: the end the width is chosen for is the area's
    assert chosen[0.5].ends == pytest.approx((6.0 + 4 * 2.0 * widths.amdahl(0.1, 4)) / 4)


_PEERS = st.lists(st.builds(Peer, runtime=st.floats(0.1, 50), tail=st.floats(0, 20), serial=st.floats(0, 1),
                            high=st.sampled_from([2, 4, 8]), spread=st.floats(0, 1)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(runtime=st.floats(0.1, 50), tail=st.floats(0, 20), serial=st.floats(0, 1), spread=st.floats(0, 1),
       backlog=st.floats(0, 500), free=st.integers(1, 8), peers=_PEERS)
def test_a_spread_never_makes_a_sure_key_start_narrower(runtime, tail, serial, spread, backlog, free, peers):
    """Whatever waits beside it, a task of a key sure of its speed-up starts at least as wide when
    its run time may run longer: only its own end is reckoned later."""
    outlook = Outlook(cores=16, domain_cores=8, free=free, backlog=backlog, peers=tuple(peers))
    steady = choose_width(1, 8, runtime, tail, serial, widths.SURE_AFTER, outlook)
    spread_out = choose_width(1, 8, runtime, tail, serial, widths.SURE_AFTER, outlook, spread=spread)
    assert spread_out.width >= steady.width


def test_the_allotment_reckons_each_waiting_tasks_end_with_its_spread():
    sure = dict(serial=0.1, high=4)
    [steady], _, _ = allot([Peer(2.0, **sure)], 4, 4, 6.0)
    [spread], _, _ = allot([Peer(2.0, spread=0.5, **sure)], 4, 4, 6.0)
    assert (steady, spread) == (1, 4)
    # a key that does not speed up is not widened for its spread: no width ends it sooner
    [flat], _, _ = allot([Peer(2.0, serial=1.0, high=4, spread=0.5)], 4, 4, 6.0)
    assert flat == 1


def _spreads_told(monkeypatch) -> list[float]:
    told = []
    choose = widths.Widths.choose

    def spying(self, *args, **kwargs):
        told.append(kwargs.get("spread", 0.0))
        return choose(self, *args, **kwargs)

    monkeypatch.setattr(widths.Widths, "choose", spying)
    return told


@pytest.mark.parametrize("ran, expected", [
    ((), ONE_RUN_SPREAD),  # told by the store, no run of the key yet: as told
    ((1.0, 3.0), 2 ** 0.5 / 2),  # two runs in this run: their relative std
    ((0.1, 10.0), GUESSED_SPREAD),  # at most a guess's
])
def test_a_tasks_spread_is_its_keys_runs_in_this_run_once_two_have_ended(monkeypatch, ran, expected):
    told = _spreads_told(monkeypatch)
    s = Scheduler([[0]], "scalpel", llc=12 * MiB)
    now = 0.0
    for i, seconds in enumerate(ran):
        s.add([Task(f"ran{i}", runtime=2.0, key="k", max_cores=2, runtime_spread=ONE_RUN_SPREAD)])
        [start] = s.dispatch(now)
        now += seconds
        s.release(start.slot, now)
    s.add([Task("next", runtime=2.0, key="k", max_cores=2, runtime_spread=ONE_RUN_SPREAD)])
    s.dispatch(now)
    assert told[-1] == pytest.approx(expected)


def test_a_guess_is_not_counted_as_a_spread(monkeypatch):
    """A guess says nothing of a task's scale: counted, three tasks of a key that does not speed up
    looked as late on one core as tried on both, and were all tried, one after another."""
    told = _spreads_told(monkeypatch)
    s = Scheduler([[0, 1]], "scalpel", llc=12 * MiB)
    s.add([Task(f"t{i}", runtime=1.0, key="k", max_cores=2, runtime_spread=GUESSED_SPREAD) for i in range(3)])
    starts = s.dispatch(0.0)
    assert told and set(told) == {0.0}
    assert sorted(a.task.cores for a in starts) == [1, 1]  # each on one core; no try of both yet


def test_a_wider_run_of_a_key_with_no_reading_teaches_its_guessed_tasks_a_run_time_never_read_against():
    """Three guessed tasks of an unsure key on four cores: one is tried on two cores and ends first.
    The others, running and waiting, take its 0.6 s at no gain (the least their narrowest width
    takes); a task started on that estimate and tried wider reads no speed-up; the first narrow end
    (1.0 s) teaches the tasks not started again, and their runs are read."""
    s = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
    first = [Task(f"t{i}", runtime=1.0, key="k", max_cores=4, runtime_spread=GUESSED_SPREAD) for i in range(3)]
    s.add(first)
    started = {a.task.id: a for a in s.dispatch(0.0)}
    assert started["t0"].task.cores == 2 and started["t0"].task.width_reason == widths.EXPLORING
    later, last = (Task(f"t{i}", runtime=1.0, key="k", max_cores=4, runtime_spread=GUESSED_SPREAD) for i in (3, 4))
    s.add([later, last])
    assert s.dispatch(0.0) == []
    s.release(started["t0"].slot, 0.6)
    assert s.widths.model.readings("k") == 0
    for task in (first[1], first[2], later, last):
        assert (task.runtime, task.runtime_spread) == (pytest.approx(0.6), ONE_RUN_SPREAD)
    [tried] = s.dispatch(0.6)
    assert tried.task is later and later.cores == 2
    s.release(tried.slot, 0.9)
    assert s.widths.model.readings("k") == 0 and later.width_reading is None  # against 0.6 s it would read wrong
    s.release(started["t1"].slot, 1.0)  # a narrow run: the key's run time, for the tasks not started
    assert last.runtime == pytest.approx(1.0)
    assert first[2].runtime == pytest.approx(1.0)  # running: its end re-estimated, its run still not read
    s.release(started["t2"].slot, 1.1)
    assert s.widths.model.readings("k") == 0
    [start] = s.dispatch(1.1)
    assert start.task is last and last.cores > 1
    s.release(start.slot, 1.1 + 0.6)
    assert s.widths.model.readings("k") == 1 and last.width_reading is not None
