"""The admission rule that keeps to a plan made with per-key terms while they hold (core.admission)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission
from scalpel_executor.core.admission import (CORUN_NOTHING_FITS, KEPT_APART, KEPT_TO_PLAN, TERMS_EVIDENCE, Running,
                                             TermsLedger, decide)
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task

MiB = 2**20
LLC = 32 * MiB
MODEL = ContentionModel()
STREAM = (0.0, 0.4)  # a small task that presses: the footprint model calls it harmless


def replay(ledger: TermsLedger, tasks: list[Task], records) -> None:
    """Feed ``ledger`` a simulated run's starts and ends in time order (ends first at a tie)."""
    events = sorted([(r.start, 1, i, r.domain) for i, r in enumerate(records)]
                    + [(r.end, 0, i, r.domain) for i, r in enumerate(records)])
    by_name = {str(t.id): t for t in tasks}
    for now, is_start, i, domain in events:
        task = by_name[records[i].name]
        (ledger.started if is_start else ledger.ended)(domain, task, now)


def test_a_pressure_that_was_not_there_is_judged_wrong_after_enough_co_runs():
    ledger = TermsLedger(MODEL, LLC)
    stream = Task("s", MiB, 1.0, key="stream", interference=STREAM)
    for n in range(TERMS_EVIDENCE):
        victim = Task(n, MiB, 1.0, key="plain")
        ledger.started(0, victim, 10.0 * n)
        ledger.started(0, stream, 10.0 * n)
        ledger.ended(0, victim, 10.0 * n + 1.0)  # it ran as if alone: the footprint model was right
        ledger.ended(0, stream, 10.0 * n + 1.0)
        assert ledger.held(stream) == (n + 1 < TERMS_EVIDENCE)
    assert all(credit < 0 for credit in ledger.credits("stream"))
    assert not ledger.held(Task("p", MiB, 1.0, key="plain"))  # told nothing: nothing held


def test_a_pressure_that_was_there_holds():
    ledger = TermsLedger(MODEL, LLC)
    stream = Task("s", MiB, 1.0, key="stream", interference=STREAM)
    for n in range(2 * TERMS_EVIDENCE):
        victim = Task(n, MiB, 1.0, key="plain")
        ledger.started(0, victim, 10.0 * n)
        ledger.started(0, stream, 10.0 * n)
        ledger.ended(0, victim, 10.0 * n + 1.45)  # near the terms' 1.49x
        ledger.ended(0, stream, 10.0 * n + 1.45)
    assert ledger.held(stream) and min(ledger.credits("stream")) > 0


def test_untimed_and_handed_back_tasks_teach_nothing():
    ledger = TermsLedger(MODEL, LLC)
    stream = Task("s", MiB, 1.0, key="stream", interference=STREAM)
    victim = Task("v", MiB, 1.0, key="plain")
    ledger.started(0, stream, None)
    ledger.started(0, victim, 0.0)
    ledger.ended(0, victim, None)  # handed back (a worker died)
    ledger.ended(0, stream, 2.0)
    assert ledger.credits("stream") == []


terms = st.one_of(st.none(), st.tuples(st.floats(-0.3, 0.3), st.floats(0.0, 0.5)))


@st.composite
def batches(draw):
    kinds = draw(st.lists(st.tuples(st.integers(1, 20), terms), min_size=1, max_size=4))
    tasks = draw(st.lists(st.tuples(st.integers(0, len(kinds) - 1), st.floats(0.2, 3.0)), min_size=2, max_size=14))
    return [SimTask(str(i), runtime, footprint=kinds[k][0] * MiB, interference=kinds[k][1], key=f"k{k}")
            for i, (k, runtime) in enumerate(tasks)]


def to_tasks(sims: list[SimTask], told: str) -> list[Task]:
    return [Task(t.name, t.footprint, t.solo_time, key=t.key,
                 interference=t.interference if told == "truth" else None if t.interference is None
                 else (t.interference[0] + 0.3, t.interference[1] + 0.3)) for t in sims]


@settings(max_examples=60, deadline=None)
@given(batches())
def test_terms_told_the_truth_are_never_judged_wrong(sims):
    run = simulate(sims, [[0, 1, 2]], LLC, "fifo")
    tasks = to_tasks(sims, "truth")
    ledger = TermsLedger(MODEL, LLC)
    replay(ledger, tasks, run.records)
    assert all(ledger.held(t) for t in tasks if admission.told_terms(t))
    assert all(credit >= -1e-9 for t in tasks for credit in ledger.credits(t.key))


@settings(max_examples=60, deadline=None)
@given(batches())
def test_terms_where_the_truth_is_footprints_never_credit_the_terms(sims):
    plain = [dataclasses.replace(t, interference=None) for t in sims]
    run = simulate(plain, [[0, 1, 2]], LLC, "fifo")
    tasks = to_tasks(sims, "off")  # told terms 0.3 above what they are, on a machine with none
    ledger = TermsLedger(MODEL, LLC)
    replay(ledger, tasks, run.records)
    assert all(credit <= 1e-9 for t in tasks for credit in ledger.credits(t.key))


def _head_and_running(foreseen: float | None):
    head = Task("h", MiB, 1.0, key="h", interference=STREAM, foreseen_harm=foreseen)
    running = [Running(Task("r", MiB, 1.0, key="r", interference=STREAM), 0.5)]
    fitting = Task("f", MiB, 1.0, key="f")  # told nothing, but it overflows beside a stream too
    return head, running, fitting


def test_a_plan_made_with_terms_that_held_is_kept_to():
    head, running, waiting = _head_and_running(foreseen=0.1)  # the plan foresaw less harm than there is now
    kwargs = dict(deferral_pays=lambda h, w: True, model=MODEL, llc=LLC)
    assert decide(head, [waiting], running, **kwargs).reason != KEPT_TO_PLAN  # no ledger: checked as ever
    assert decide(head, [waiting], running, held=lambda t: True, **kwargs) == admission.Decision(head, KEPT_TO_PLAN)
    wrong = decide(head, [waiting], running, held=lambda t: t.key != "r", **kwargs)  # what runs there was wrong
    assert wrong.reason in (KEPT_APART, CORUN_NOTHING_FITS, admission.CORUN_WAIT_COSTS_MORE)
    unplanned, _, _ = _head_and_running(foreseen=None)  # nobody weighed its co-runs with the terms
    assert decide(unplanned, [waiting], running, held=lambda t: True, **kwargs).reason != KEPT_TO_PLAN


tasks_strategy = st.builds(lambda f, r, told, fh: Task(f"t{f}{r}", f * MiB, r, key=f"k{f}",
                                                       interference=(0.1, 0.2) if told else None,
                                                       foreseen_harm=fh),
                           st.integers(1, 24), st.floats(0.1, 3.0), st.booleans(),
                           st.one_of(st.none(), st.floats(0.0, 0.5)))


@settings(max_examples=200, deadline=None)
@given(tasks_strategy, st.lists(tasks_strategy, max_size=4), st.lists(tasks_strategy, min_size=1, max_size=3),
       st.booleans(), st.booleans())
def test_keeping_to_the_plan_is_the_only_change_and_only_for_a_planned_told_head(head, others, running, pays, held):
    running = [Running(task, task.runtime / 2) for task in running]
    kwargs = dict(deferral_pays=lambda h, w: pays, model=MODEL, llc=LLC)
    before = decide(head, others, running, **kwargs)
    after = decide(head, others, running, held=lambda t: held and admission.told_terms(t), **kwargs)
    if after != before:
        assert after == admission.Decision(head, KEPT_TO_PLAN)
        assert held and admission.told_terms(head) and head.foreseen_harm is not None
    assert decide(head, others, running, held=lambda t: False, **kwargs) == before


def test_a_run_told_no_terms_keeps_no_ledger_and_schedules_as_before():
    sims = [SimTask(str(i), 1.0 + i % 3, footprint=(4 + 5 * (i % 4)) * MiB) for i in range(24)]
    scheduler = Scheduler([[0, 1, 2, 3]], "scalpel", llc=LLC)
    simulate(sims, [[0, 1, 2, 3]], LLC, scheduler=scheduler)
    assert KEPT_TO_PLAN not in scheduler.reasons


def test_a_simulated_run_told_the_truth_keeps_to_its_plan():
    sims = [SimTask(str(i), 1.0 + i % 3, footprint=MiB, key=f"k{i % 3}",
                    interference=STREAM if i % 3 == 0 else None) for i in range(18)]
    told = [dataclasses.replace(t, told_interference=t.interference) for t in sims]
    scheduler = Scheduler([[0, 1, 2]], "scalpel", llc=LLC)
    simulate(told, [[0, 1, 2]], LLC, scheduler=scheduler)
    checked = {reason for reason in scheduler.reasons if reason.startswith("co-run")}
    assert checked <= {admission.FORESEEN, KEPT_TO_PLAN}, scheduler.reasons
