"""The default policy's check of a plan made with per-key interference terms (core.planning, step 5):
the plan made with the terms is dispatched only where terms drawn around the told ones still predict
it ending sooner, on average, than the plan a batch told nothing gets."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import planning
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.core.planning import PlanContext, plan_scalpel, robust_choice, scalpel_order
from scalpel_executor.core.tasks import Task

MiB = 2**20
LLC = 32 * MiB
MODEL = ContentionModel()
TERMS = [None, (0.0, 0.0), (0.25, 0.0), (0.05, 0.3), (-0.2, 0.3), (0.0, 0.1, 0.5)]


def _batch(specs):
    tasks = [Task(i, fp * MiB, runtime, key=f"k{kind}", interference=TERMS[kind])
             for i, (runtime, fp, kind) in enumerate(specs)]
    for i, task in enumerate(tasks):
        task.seq = i
    return tasks


specs = st.lists(st.tuples(st.floats(0.5, 20), st.sampled_from([1, 8, 24]), st.integers(0, len(TERMS) - 1)),
                 min_size=2, max_size=12)


@settings(max_examples=30, deadline=None)
@given(specs, st.sampled_from([[2], [2, 2], [4], [4, 4]]))
def test_told_terms_dispatch_their_plan_or_the_plan_made_without_them(specs, domains):
    """Whatever the terms, the order dispatched is one of two plans: the one made with the terms or
    the one a batch told nothing gets. Sent back to the latter, the batch is told nothing: its tasks'
    terms are dropped and their foreseen harm is footprint-only's, so admission is as without terms."""
    context = PlanContext(domains, llc=LLC)
    told = _batch(specs)
    plain = [replace(t, interference=None) for t in told]
    with_terms, _ = planning._checked_plan(told, context)
    without, _ = planning._checked_plan(plain, context)
    order = scalpel_order(told, context)
    assert order in (with_terms, without)
    terms = [t.interference for t in told]
    plan_scalpel(told, context)
    plan_scalpel(plain, context)
    if order != with_terms:
        assert all(t.interference is None for t in told)
        assert [t.foreseen_harm for t in told] == [t.foreseen_harm for t in plain]
    else:
        assert [t.interference for t in told] == terms


@settings(max_examples=40, deadline=None)
@given(specs, st.sampled_from([[2], [2, 2], [4]]))
def test_an_order_no_better_in_any_draw_of_the_terms_is_not_taken(specs, domains):
    """Two orders no draw of the terms tells apart (two tasks alike, key and terms included, swapped):
    the first is kept, as the robustness check keeps longest-first on no gain."""
    tasks = _batch([*specs, specs[0]])
    first = list(range(len(tasks)))
    swapped = [first[-1], *first[1:-1], first[0]]
    context = PlanContext(domains, llc=LLC)
    assert robust_choice(tasks, [0.0] * len(tasks), [first, swapped], context, LLC, 10**6,
                         terms_spread=planning.TERMS_SPREAD, z=0.0) is first


def test_a_gain_within_one_standard_error_of_the_drawn_terms_is_not_taken():
    """Terms of a few hundredths: drawn 0.03 around what was told, the second order ends sooner on
    average, but by less than one standard error of that mean (planning.TERMS_Z): the check keeps
    the first, where the mean alone (z = 0) would take the second."""
    specs = [(2.0, 8, (0.02, 0.0)), (2.0, 20, (0.0, 0.02)), (1.0, 20, (0.0, 0.02)), (1.0, 20, (0.02, 0.0)),
             (3.0, 20, (0.01, 0.03)), (2.0, 8, None)]
    tasks = [Task(i, fp * MiB, runtime, key=str(terms), interference=terms, seq=i)
             for i, (runtime, fp, terms) in enumerate(specs)]
    first, second = [0, 1, 2, 3, 4, 5], [1, 4, 5, 0, 2, 3]
    context = PlanContext([2], llc=LLC)

    def kept(z):
        return robust_choice(tasks, [0.0] * 6, [first, second], context, LLC, 10**6,
                             terms_spread=planning.TERMS_SPREAD, z=z)

    assert kept(0.0) is second and kept(planning.TERMS_Z) is first


def test_the_terms_check_asks_for_terms_z_standard_errors(monkeypatch):
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return robust_choice(*args, **kwargs)

    monkeypatch.setattr(planning, "robust_choice", spy)
    tasks = _streams_and_lookups()
    scalpel_order(tasks, PlanContext([2, 2], llc=LLC))
    assert {"terms_spread": planning.TERMS_SPREAD, "z": planning.TERMS_Z} in calls


def _streams_and_lookups():
    """Two small streams and two small lookups on 2 domains of 2 cores: by footprint any pairing is
    free; told, two streams together run 2.01x, a stream beside a lookup 1.35x."""
    tasks = [Task(0, MiB, 4.0, key="stream", interference=(0.3, 0.4)), Task(1, MiB, 4.0, key="lookup"),
             Task(2, MiB, 4.0, key="stream", interference=(0.3, 0.4)), Task(3, MiB, 4.0, key="lookup")]
    for i, task in enumerate(tasks):
        task.seq = i
    return tasks


def test_a_gain_far_beyond_the_terms_spread_keeps_the_plan_made_with_them():
    tasks, context = _streams_and_lookups(), PlanContext([2, 2], llc=LLC)
    together, apart = [0, 1, 2, 3], [0, 2, 1, 3]  # the free cores are dealt round-robin: 1st and 3rd together
    assert robust_choice(tasks, [0.0] * 4, [together, apart], context, LLC, 10**6,
                         terms_spread=planning.TERMS_SPREAD, z=planning.TERMS_Z) is apart
    ev = FcfsEvaluator([4.0] * 4, [MiB] * 4, [None] * 4, [2, 2], LLC, MODEL,
                       interference=[t.interference for t in tasks])
    assert ev.run(apart) < ev.run(together)


def test_with_no_budget_for_the_check_the_plan_made_without_terms_is_dispatched():
    """A budget too small to pay for four scenarios of two orders: nothing can be checked, so the
    plan made with the terms is not trusted over the one a batch told nothing gets."""
    tasks = _streams_and_lookups()
    plain = [replace(t, interference=None) for t in tasks]
    context = PlanContext([2, 2], llc=LLC, budget=20)  # 20 starts: fewer than 4 scenarios x 2 orders x 4 tasks
    with_terms, _ = planning._checked_plan(tasks, context)
    without, _ = planning._checked_plan(plain, context)
    assert with_terms != without  # the terms' plan keeps the streams apart, the plain one pairs them
    assert scalpel_order(tasks, context) == without
