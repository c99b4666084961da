"""A malleable task planned wider than the cores free, with nothing to backfill them, starts on
those cores when that ends it sooner and spends no more core-seconds (core.widths.start_now)."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import widths
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, graph_tails, simulate
from scalpel_executor.core.widths import Crowding, Peer, Widths, shaped_sizes, start_now

MiB = 2**20
MODEL = ContentionModel()
PAPER = [[0, 1, 2, 3], [4, 5, 6, 7]]  # two domains of 4 cores, 12 MiB of LLC each


def test_it_starts_now_only_where_that_ends_it_sooner_and_spends_no_more():
    parallel = Peer(8.0, serial=0.0, high=4)
    assert start_now(parallel, 4, 2, 3.0, 4) == 2  # 4 s now, or 3 + 2 s
    assert start_now(parallel, 4, 2, 1.0, 4) is None  # 4 s now, or 1 + 2 s
    assert start_now(parallel, 4, 3, 3.0, 4) == 2  # the widest shaped size on the cores free
    assert start_now(parallel, 4, 2, float("inf"), 4) == 2  # nothing running frees the planned cores
    assert start_now(parallel, 2, 1, 10.0, 4) == 1
    assert start_now(Peer(8.0, serial=0.0, low=2, high=4), 4, 1, 10.0, 4) is None  # below its narrowest
    # crowded four to a domain on one core, a task spends more core-seconds than on the whole domain
    crowded = Peer(4.0, serial=0.05, high=4, footprint=8 * MiB)
    crowding = Crowding(MODEL, 12 * MiB, 4, 8 * MiB)
    assert crowding.slowdown(8 * MiB, 1) > 1.2
    assert start_now(crowded, 4, 1, 100.0, 4, crowding=crowding) is None
    assert start_now(crowded, 4, 1, 100.0, 4) == 1  # the cache not counted: sooner, and as cheap


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(st.floats(0.01, 100), st.floats(0, 1), st.sampled_from([1, 2, 4, 8]), st.integers(1, 8),
       st.integers(0, 8), st.floats(0, 100))
def test_a_start_now_is_narrower_shaped_sooner_and_no_dearer(runtime, serial, domain, high, free, wait):
    peer = Peer(runtime, serial=serial, high=high)
    planned = max(w for w in widths._sizes(1, min(high, domain), domain, True))
    width = start_now(peer, planned, free, wait, domain)
    if width is None:
        return
    own, later = widths._own(runtime, serial, 1, width), widths._own(runtime, serial, 1, planned)
    assert width < planned and width <= free and width in shaped_sizes(domain)
    assert own < wait + later
    assert width * own <= planned * later * (1 + widths.TIE)


def _splits(count: int = 4, serial: float = 0.1, policy: str = "scalpel", spread: float = 0.0):
    """``count`` splits of 8.8 s on one core, each followed by a chain of four short tasks, their
    speed-ups known, on ``paper``: Epigenomics' first stage, as the width study draws it, scaled down."""
    tasks = [SimTask(f"split{i}", 8.8, 2 * MiB, max_cores=4, serial_fraction=serial, key="split")
             for i in range(count)]
    for i in range(count):
        parent = i
        for step in range(4):
            tasks.append(SimTask(f"step{i}.{step}", 0.5 + 0.02 * i, 2 * MiB, parents=(parent,), max_cores=4,
                                 serial_fraction=0.07, key=f"step{step}"))
            parent = len(tasks) - 1
    tasks = [dataclasses.replace(t, tail=tail, runtime_spread=spread) for t, tail in zip(tasks, graph_tails(tasks))]
    rule = Widths()
    for key, fraction in {t.key: t.serial_fraction for t in tasks}.items():
        rule.model.seed(key, fraction, 50)
    scheduler = Scheduler(PAPER, policy, llc=12 * MiB, model=MODEL, width_rule=rule)
    return simulate(tasks, PAPER, 12 * MiB, model=MODEL, scheduler=scheduler), scheduler


def _never_now(monkeypatch):
    monkeypatch.setattr(widths, "start_now", lambda *args, **kwargs: None)


@pytest.mark.parametrize("packing", [True, False])
@pytest.mark.parametrize("policy", ["scalpel", "scalpel-paper"])  # admitted at dispatch, and not
def test_no_core_idles_under_a_reservation_that_a_start_now_ends_sooner(policy, packing, monkeypatch):
    """Four splits (serial fraction 0.1) allotted 2, 2, 2 and 4 cores (the allotment counts the
    eight cores as one pool): the fourth waits for a whole domain while two cores idle under its
    reservation, 8.38 s. Packed on the domains, every split starts at once on two cores (6.08 s);
    without that check (``packing`` False), the fourth starts on the two cores free (``sooner on
    the cores free``), 6.08 s too; under ``scalpel-paper`` a step heard with the splits' ends
    together may start so too."""
    if not packing:
        monkeypatch.setattr(widths, "PACKED_PEERS", 0)
    result, scheduler = _splits(policy=policy)
    splits = [r for r in result.records if r.name.startswith("split")]
    started_free = scheduler.width_reasons[widths.FREE_NOW]
    assert (started_free == 0) if packing else (started_free >= 1)
    assert [(r.start, r.cores) for r in splits] == [(0.0, 2)] * 4  # every core busy from the start
    assert result.makespan < 6.2
    _never_now(monkeypatch)
    waited, _ = _splits(policy=policy)
    assert waited.makespan == pytest.approx(result.makespan, rel=0.01) if packing else waited.makespan > 8.0


def test_a_task_waits_for_its_planned_width_while_run_times_are_guesses():
    """Whether waiting would end it later depends on when the running tasks end: while their run
    times (or its own) are guesses, a planned task waits for its width as before."""
    result, _ = _splits(spread=1.0)
    splits = sorted((r.start, r.cores) for r in result.records if r.name.startswith("split"))
    assert sum(cores for start, cores in splits if start < 0.1) == 6
    assert splits[-1][0] > 0.1 and splits[-1][1] == 4  # the fourth waited for the four cores it was planned on


def test_the_allotment_keeps_a_core_for_every_split_where_their_chains_end_the_work():
    """Five splits (serial fraction 0.153): their area over the eight cores, then the shortest chain,
    ends the work whatever the widths past 2, 2, 2, 2 and 4; the allotment stops there itself
    (8.89 s), without the packing check or a start now. Bounded by the area alone it widened on to
    2, 2, 2, 4 and 4, two splits waited for whole domains and two cores idled under their
    reservations until the first three ended (9.89 s)."""
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patch:
        patch.setattr(widths, "PACKED_PEERS", 0)
        _never_now(patch)
        result, scheduler = _splits(count=5, serial=0.153)
    splits = sorted((r.start, r.cores) for r in result.records if r.name.startswith("split"))
    assert [cores for start, cores in splits if start == 0.0] == [2, 2, 2, 2]
    assert splits[-1][1] == 4
    assert result.makespan < 9.0


def test_the_last_task_waits_for_more_cores_only_where_that_ends_it_sooner():
    fit = Peer(3.6, serial=0.2, high=2)  # 2.16 s on two cores
    assert widths.wait_wider(fit, 1, [0.0, 0.1]) == 2  # 0.1 + 2.16 s, not 3.6 s
    assert widths.wait_wider(fit, 1, [0.0, 2.0]) == 1  # 2.0 + 2.16 s is later
    assert widths.wait_wider(fit, 2, [0.0, 0.0]) == 2
    assert widths.wait_wider(Peer(3.6, serial=1.0, high=2), 1, [0.0, 0.1]) == 1  # no gain: no wait
    assert widths.wait_wider(Peer(3.6, serial=0.2, high=1), 1, [0.0, 0.0]) == 1  # its widest
    # on a domain of 8: the width whose cores free soonest enough, a shaped size
    assert widths.wait_wider(Peer(8.0, serial=0.0, high=8), 1, [0, 0.5, 0.5, 0.5, 9, 9, 9, 9]) == 4


@settings(deadline=None)
@given(st.floats(0.01, 100), st.floats(0, 1), st.sampled_from([1, 2, 4, 8]), st.integers(1, 8),
       st.integers(1, 8), st.lists(st.floats(0, 100), min_size=8, max_size=8))
def test_a_wait_for_more_cores_is_wider_shaped_and_ends_the_task_no_later(runtime, serial, domain, high, planned, free):
    peer = Peer(runtime, serial=serial, high=high)
    planned = min(planned, high, domain)
    free_at = [0.0] * planned + free[:domain - planned]
    width = widths.wait_wider(peer, planned, free_at)
    assert planned <= width <= max(planned, min(high, domain))
    assert width == planned or width in shaped_sizes(domain)
    times = sorted(free_at)
    assert times[width - 1] + widths.at_width(runtime, serial, 1, width) <= runtime * widths.amdahl(serial, planned) + 1e-9


@pytest.mark.parametrize("seconds, makespan", [((3.6, 3.5, 3.7), 5.85), ((4.0, 3.0, 3.5, 3.2, 3.8, 3.3, 3.9), 12.75)])
def test_the_last_fit_on_two_cores_waits_for_the_second_and_a_key_not_measured_does_not(seconds, makespan):
    """Least-squares fits of a key measured at a serial fraction of 0.2 on one domain of two cores,
    a short reduce after them (``examples/malleable/fits.py``): the last fit waits 0.1 s for the
    second core and runs on both (``tail``); started on the one core free, it ran alone 1.4-1.8 s
    longer. A key not measured (no gain known) starts on the core free."""
    def run(measured):
        batch = [SimTask(f"f{i}", s, 1 * MiB, max_cores=2, serial_fraction=0.2, key="fit")
                 for i, s in enumerate(seconds)]
        batch += [SimTask("combine", 0.05, 1 * MiB, parents=tuple(range(len(seconds))), key="combine")]
        batch = [dataclasses.replace(t, tail=tail) for t, tail in zip(batch, graph_tails(batch))]
        rule = Widths()
        if measured:
            rule.model.seed("fit", 0.2, 50)
        scheduler = Scheduler([[0, 1]], "scalpel", llc=32 * MiB, model=MODEL, width_rule=rule)
        return simulate(batch, [[0, 1]], 32 * MiB, model=MODEL, scheduler=scheduler)

    result = run(measured=True)
    last = max((r for r in result.records if r.name.startswith("f")), key=lambda r: r.start)
    assert last.cores == 2 and result.makespan == pytest.approx(makespan, abs=0.01)
    assert all(r.cores == 1 for r in result.records if r.name.startswith("f") and r is not last)
    unmeasured = run(measured=False)
    assert max(r.end for r in unmeasured.records if r.name.startswith("f")) > makespan + 1.0


def _guessed_fits(seconds, guessed=True):
    """Fits of a key never seen, submitted together, their run times the prior's guess (1 s, spread 1)."""
    guess = {"runtime_estimate": 1.0, "runtime_spread": 1.0} if guessed else {}
    batch = [SimTask(f"f{i}", s, 1 * MiB, max_cores=2, serial_fraction=0.2, key="fit", **guess)
             for i, s in enumerate(seconds)]
    batch += [SimTask("combine", 0.05, 1 * MiB, parents=tuple(range(len(seconds))), key="combine")]
    return [dataclasses.replace(t, tail=tail) for t, tail in zip(batch, graph_tails(batch))]


def test_a_first_run_learns_run_times_from_its_first_end_and_tries_the_last_fit_wider():
    """A first run of five fits of equal size on two cores, every run time the prior's guess: the
    first to end teaches the others its run time, the fifth then tries both cores (an
    exploration) and its run teaches the key a speed-up. Guessed to the end, it ran on one core
    beside the other idle and the key learned nothing (``Scheduler._learn_runtime``)."""
    rule = Widths()
    scheduler = Scheduler([[0, 1]], "scalpel", llc=32 * MiB, model=MODEL, width_rule=rule)
    result = simulate(_guessed_fits((3.6,) * 5), [[0, 1]], 32 * MiB, model=MODEL, scheduler=scheduler)
    last = max((r for r in result.records if r.name.startswith("f")), key=lambda r: r.start)
    assert last.cores == 2
    assert scheduler.width_reasons[widths.EXPLORING] + scheduler.width_reasons[widths.PLANNED_EXPLORATION] == 1
    assert rule.model.readings("fit") == 1 and rule.model.serial_fraction("fit") < 0.5
    assert result.makespan < 3 * 3.6 - 1.0


def test_the_run_time_learned_reaches_the_waiting_and_running_tasks_of_the_key_whose_time_was_a_guess():
    from scalpel_executor.core.admission import ONE_RUN_SPREAD, guessed
    from scalpel_executor.core.tasks import Task
    scheduler = Scheduler([[0, 1]], "scalpel", llc=32 * MiB, model=MODEL)
    fits = [Task(i, 1 * MiB, 1.0, 0.0, runtime_spread=1.0, key="fit", max_cores=2) for i in range(3)]
    other = Task(3, 1 * MiB, 1.0, 0.0, runtime_spread=1.0, key="other", max_cores=2)
    told = Task(4, 1 * MiB, 2.0, 0.0, runtime_spread=0.1, key="fit", max_cores=2)  # its own estimate: kept
    scheduler.add(fits)
    started = scheduler.dispatch(0.0)
    assert len(started) == 2 and all(guessed(a.task) for a in started)
    scheduler.add([other, told])
    ended = scheduler.release(started[0].slot, 5.0)
    running = started[1].task
    assert running.runtime == pytest.approx(5.0) and running.runtime_spread == ONE_RUN_SPREAD
    waiting = [t for t in fits if t is not ended and t is not running]
    assert len(waiting) == 1 and waiting[0].runtime_spread == ONE_RUN_SPREAD
    assert waiting[0].runtime == pytest.approx(widths.at_width(5.0, 1.0, 1, waiting[0].cores))  # no gain known
    assert (other.runtime, other.runtime_spread) == (1.0, 1.0) and (told.runtime, told.runtime_spread) == (2.0, 0.1)
