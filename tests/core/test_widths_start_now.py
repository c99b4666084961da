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


def _splits(known: bool, policy: str = "scalpel", spread: float = 0.0):
    """Five splits of 8.8 s on one core (serial fraction 0.153), each followed by a chain of four
    short tasks, on ``paper``: Epigenomics' first stage, as the width study draws it, scaled down."""
    tasks = [SimTask(f"split{i}", 8.8, 2 * MiB, max_cores=4, serial_fraction=0.153, key="split") for i in range(5)]
    for i in range(5):
        parent = i
        for step in range(4):
            tasks.append(SimTask(f"step{i}.{step}", 0.5 + 0.02 * i, 2 * MiB, parents=(parent,), max_cores=4,
                                 serial_fraction=0.07, key=f"step{step}"))
            parent = len(tasks) - 1
    tasks = [dataclasses.replace(t, tail=tail, runtime_spread=spread) for t, tail in zip(tasks, graph_tails(tasks))]
    rule = Widths()
    if known:
        for key, serial in {t.key: t.serial_fraction for t in tasks}.items():
            rule.model.seed(key, serial, 50)
    scheduler = Scheduler(PAPER, policy, llc=12 * MiB, model=MODEL, width_rule=rule)
    return simulate(tasks, PAPER, 12 * MiB, model=MODEL, scheduler=scheduler), scheduler


@pytest.mark.parametrize("packing", [True, False])
@pytest.mark.parametrize("policy", ["scalpel", "scalpel-paper"])  # admitted at dispatch, and not
def test_no_core_idles_under_a_reservation_that_a_start_now_ends_sooner(policy, packing, monkeypatch):
    """Planned at 2, 2, 2, 4 and 4 cores (the allotment counts the eight cores as one pool), two
    splits waited for whole domains while two cores idled under their reservations until the first
    three splits ended: 9.89 s. Now the plan is packed on the domains (2, 2, 2, 2 and 4: with chains
    after them, only narrower, widths.packed), 8.89-8.98 s; without that check (``packing`` False),
    the fourth starts on those two cores (``sooner on the cores free``), 8.96 s; under
    ``scalpel-paper`` a step heard with the four splits' ends together may start so too."""
    if not packing:
        monkeypatch.setattr(widths, "PACKED_PEERS", 0)
    result, scheduler = _splits(known=True, policy=policy)
    splits = [r for r in result.records if r.name.startswith("split")]
    started_free = scheduler.width_reasons[widths.FREE_NOW]
    assert (started_free == 0) if packing else (1 <= started_free <= 2)
    assert sum(r.cores for r in splits if r.start < 0.1) == 8  # every core busy from the start
    assert result.makespan < 9.4


def test_a_task_waits_for_its_planned_width_while_run_times_are_guesses():
    """Whether waiting would end it later depends on when the running tasks end: while their run
    times (or its own) are guesses, a planned task waits for its width as before."""
    result, scheduler = _splits(known=True, spread=1.0)
    assert scheduler.width_reasons[widths.FREE_NOW] == 0
    assert sum(r.cores for r in result.records if r.name.startswith("split") and r.start < 0.1) == 6
