"""The default policy planning with per-task interference terms (Task.interference, core.interference)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import corun_slowdowns
from scalpel_executor.core.interference_fit import InterferenceModel
from scalpel_executor.core.orders import FcfsEvaluator, RunningTask
from scalpel_executor.core.planning import PlanContext, plan_scalpel, scalpel_order
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task

MiB = 2**20
LLC = 32 * MiB
MODEL = ContentionModel()

specs = st.lists(st.tuples(st.floats(0.1, 20), st.sampled_from([0, 1, 8, 24, 40]), st.sampled_from([0.0, 0.0, 0.3]),
                           st.sampled_from([1, 1, 1, 2])),
                 min_size=1, max_size=12)


def _batch(specs, terms, *, wide: bool):
    tasks = [Task(i, fp * MiB, runtime, runtime_spread=spread, cores=cores if wide else 1, interference=terms)
             for i, (runtime, fp, spread, cores) in enumerate(specs)]
    for i, task in enumerate(tasks):
        task.seq = i
    return tasks


@settings(max_examples=80, deadline=None)
@given(specs, st.sampled_from([[1], [2], [2, 2], [4]]), st.booleans(), st.booleans())
def test_zero_terms_change_no_plan(specs, domains, wide, running):
    """Residuals of 0 take the path every residual takes and plan exactly as the footprint model alone:
    the same order, the same foreseen harm, the same predicted end."""
    now = [RunningTask(0, 12 * MiB, 3.0)] if running and not wide else []
    context = PlanContext(domains, llc=LLC, running=now)
    plain, zero = _batch(specs, None, wide=wide), _batch(specs, (0.0, 0.0), wide=wide)
    assert scalpel_order(plain, context) == scalpel_order(zero, context)
    plan_scalpel(plain, context)
    plan_scalpel(zero, context)
    assert [t.foreseen_harm for t in plain] == [t.foreseen_harm for t in zero]
    solo, footprints = [t.runtime for t in plain], [t.footprint for t in plain]
    order = list(range(len(plain)))
    before = FcfsEvaluator(solo, footprints, [None] * len(plain), domains, LLC, MODEL, now).run(order)
    after = FcfsEvaluator(solo, footprints, [None] * len(plain), domains, LLC, MODEL, now,
                          interference=[(0.0, 0.0)] * len(plain)).run(order)
    assert before == after


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 8, 24, 40]), min_size=0, max_size=3), st.sampled_from([0, 1, 8, 24, 40]))
def test_zero_terms_leave_the_admission_rule_as_it_was(running, newcomer):
    footprints = [f * MiB for f in running]
    assert admission.slowdown_increase(MODEL, LLC, footprints, newcomer * MiB) == \
        admission.slowdown_increase(MODEL, LLC, footprints, newcomer * MiB, [(0.0, 0.0)] * len(running), (0.0, 0.0))


def test_the_evaluator_the_admission_rule_and_the_model_compute_one_formula():
    footprints, terms = [MiB, 10 * MiB, 20 * MiB], [(0.2, 0.0), None, (0.0, 0.3)]
    factors = corun_slowdowns(MODEL, footprints, [1.0] * 3, LLC, terms)
    plain = MODEL.slowdowns(footprints, [1.0] * 3, LLC)
    assert factors == pytest.approx([plain[0] * math.exp(0.5), plain[1] * math.exp(0.3), plain[2]])
    keyed = InterferenceModel(MODEL, LLC, {"a": 0.2}, {"c": 0.3})
    assert keyed.slowdowns(["a", "b", "c"], footprints) == factors
    assert keyed.terms("a") == (0.2, 0.0, 0.0) and keyed.terms("b") is None
    pair = FcfsEvaluator([1.0, 1.0], [MiB, MiB], [None] * 2, [2], LLC, MODEL, interference=[(0.2, 0.0), (0.0, 0.3)])
    assert pair.run([0, 1]) == pytest.approx(1.0 + (1.0 - math.exp(-0.5)))  # 0 at 1/1.65x until 1 ends at 1 s
    increases, own = admission.slowdown_increase(MODEL, LLC, footprints[:2], footprints[2], terms[:2], terms[2])
    before = corun_slowdowns(MODEL, footprints[:2], [1.0] * 2, LLC, terms[:2])
    assert increases == pytest.approx([factors[0] - before[0], factors[1] - before[1]])
    assert own == pytest.approx(factors[2] - 1.0)
    assert corun_slowdowns(MODEL, footprints, [1.0] * 3, math.inf, terms) == [1.0] * 3  # no LLC: no contention


def test_streaming_tasks_the_footprint_model_calls_harmless_are_kept_apart():
    """Two small streams and two small lookups on 2 domains of 2 cores: by footprint any pairing is
    free. A stream presses 0.4 and suffers 0.3 in log slowdown: two together run 2.01x, a stream
    beside a lookup 1.35x and the lookup 1.49x."""
    def domains_of(stream_terms):
        tasks = [Task("stream0", MiB, 4.0, interference=stream_terms), Task("lookup0", MiB, 4.0),
                 Task("stream1", MiB, 4.0, interference=stream_terms), Task("lookup1", MiB, 4.0)]
        scheduler = Scheduler([[0, 1], [2, 3]], "scalpel", llc=LLC)
        scheduler.add(tasks)
        return {a.task.id: a.slot.domain for a in scheduler.dispatch(0.0)}

    footprint_only = domains_of(None)
    assert footprint_only["stream0"] == footprint_only["stream1"]  # the submission order, dealt round-robin
    told = domains_of((0.3, 0.4))
    assert told["stream0"] != told["stream1"]


def test_terms_of_one_length_per_task():
    with pytest.raises(ValueError, match="interference terms are given for 1 tasks, not the 2"):
        FcfsEvaluator([1.0, 1.0], [0.0, 0.0], [None, None], [2], LLC, MODEL, interference=[None])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 10), st.sampled_from([0, 1, 8, 24, 40]), st.sampled_from([0.0, 2.0]),
                          st.sampled_from([0, 0, 1])), min_size=1, max_size=14),
       st.sampled_from([[[0, 1]], [[0, 1], [2, 3]], [[0, 1, 2, 3]]]))
def test_zero_terms_change_no_schedule(specs, domains):
    """The whole scheduler (plan, admission, rollouts, replans on arrivals and DAG releases) told
    residuals of 0 runs exactly the schedule it runs told none."""
    def tasks(terms):
        return [SimTask(f"t{i}", runtime, fp * MiB, arrival=arrival, parents=(i - 1,) if chained and i else (),
                        interference=terms, told_interference=terms)
                for i, (runtime, fp, arrival, chained) in enumerate(specs)]
    plain = simulate(tasks(None), domains, LLC, "scalpel")
    zero = simulate(tasks((0.0, 0.0)), domains, LLC, "scalpel")
    assert plain.order == zero.order and plain.makespan == zero.makespan
    assert [(r.name, r.start, r.end) for r in plain.records] == [(r.name, r.start, r.end) for r in zero.records]
