"""The default policy, ``scalpel``: never predicted worse than longest-first or the paper's algorithm."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.domains import Topology

MiB = 2**20
TOPOLOGIES = [[[0, 1]], [[0, 1], [2, 3]], [[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 1, 2], [3]], [[0, 1, 2, 3]]]

batches = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0]), st.sampled_from([0.25, 2, 6, 12, 20, 40])),
    min_size=1, max_size=24,
).map(lambda pairs: [SimTask(f"t{i}", r, f * MiB) for i, (r, f) in enumerate(pairs)])


@settings(max_examples=120, deadline=None)
@given(batches, st.sampled_from(TOPOLOGIES), st.sampled_from([ContentionModel(), ContentionModel(0.892, 0.179),
                                                                ContentionModel(0.3, 2.0)]))
def test_scalpel_never_ends_later_than_longest_first_or_the_paper_with_exact_estimates(tasks, domains, model):
    def makespan(policy):
        return simulate(tasks, domains, 12 * MiB, policy, model=model).makespan

    ours = makespan("scalpel")
    assert ours <= makespan("longest_first") * (1 + 1e-9)
    assert ours <= makespan("scalpel-paper") * (1 + 1e-9)


def makespans_of_the_stacking_batch(spread: float) -> dict[str, float]:
    """Makespans of scalpel, scalpel-paper and longest_first on the paper machine (2 x 4 cores,
    12 MiB each, its preset's model) for ten tasks, found by a seeded random search for the widest
    margin, on which each base rule stacks the large footprints; run-time estimates told to spread
    by ``spread``."""
    spec = MACHINES["paper"]
    topology = Topology.from_spec(spec.spec)
    domains = [d.cpus for d in topology.domains]
    pairs = [(2.0, 10.0), (9.0, 4.0), (4.0, 0.5), (6.0, 10.0), (4.0, 0.5), (2.0, 4.0), (4.0, 4.0), (4.0, 8.0),
             (2.0, 4.0), (9.0, 0.5)]  # (run time s, footprint MiB)
    tasks = [SimTask(f"t{i}", r, f * MiB, runtime_spread=spread) for i, (r, f) in enumerate(pairs)]
    return {p: simulate(tasks, domains, topology.llc_size, p, model=spec.model).makespan
            for p in ("scalpel", "scalpel-paper", "longest_first")}


def test_scalpel_beats_both_on_a_batch_where_each_base_rule_stacks_large_footprints():
    # The plan ends at the lower bound (the 9 s tasks), both base rules more than 1.5 s later.
    result = makespans_of_the_stacking_batch(spread=0.0)
    assert result["scalpel"] == pytest.approx(9.0)
    assert result["scalpel-paper"] > 10.5 and result["longest_first"] > 10.5


def test_without_a_cache_size_the_plan_predicts_no_contention_and_orders_by_run_time():
    tasks = [Task(i, footprint=100 * MiB, runtime=r) for i, r in enumerate([1.0, 5.0, 3.0, 2.0])]
    for seq, t in enumerate(tasks):
        t.seq = seq
    order = scalpel_order(tasks, PlanContext([2]))
    assert order == [1, 2, 3, 0]


def test_zero_budget_keeps_the_best_base_order():
    tasks = [SimTask(f"t{i}", 1.0 + i % 3, (i % 2) * 20 * MiB) for i in range(12)]
    lean = simulate(tasks, [[0, 1], [2, 3]], 12 * MiB, "scalpel").makespan
    scheduler = Scheduler([[0, 1], [2, 3]], "scalpel", llc=12 * MiB, plan_budget=0)
    assert scheduler._context.budget == 0
    assert lean <= simulate(tasks, [[0, 1], [2, 3]], 12 * MiB, "longest_first").makespan * (1 + 1e-9)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "12MiB"])
def test_scheduler_names_a_bad_cache_size(bad):
    with pytest.raises(ValueError, match="llc must be a positive number"):
        Scheduler([[0, 1]], "scalpel", llc=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "100"])
def test_scheduler_names_a_bad_plan_budget(bad):
    with pytest.raises(ValueError, match="plan_budget must be an integer"):
        Scheduler([[0, 1]], "scalpel", plan_budget=bad)


@pytest.mark.parametrize("bad", [-1, float("nan"), True, "fast"])
def test_scheduler_names_a_bad_plan_rate(bad):
    with pytest.raises(ValueError, match="plan_rate must be a number"):
        Scheduler([[0, 1]], "scalpel", plan_rate=bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 128), min_size=1, max_size=16), st.floats(0.0, 1e5), st.integers(0, 10**6),
       st.floats(0.0, 1e4))
def test_the_allowance_is_the_rate_times_the_makespan_more_on_narrow_domains_and_never_past_the_budget(
        cores, predicted, budget, rate):
    from scalpel_executor.core.planning import NARROWEST_WIDTH, REFERENCE_WIDTH, starts_allowed

    allowed = starts_allowed(PlanContext(cores, budget=budget, rate=rate), predicted)
    assert 0 <= allowed <= budget
    widest = max(cores)
    scale = REFERENCE_WIDTH / max(NARROWEST_WIDTH, widest) if widest < REFERENCE_WIDTH else 1.0
    assert allowed == int(min(budget, rate * scale * predicted))
    # a narrower machine is never allowed fewer starts, nor one of 8 cores or more a different number
    narrower = starts_allowed(PlanContext([max(1, widest // 2)], budget=budget, rate=rate), predicted)
    assert narrower >= allowed
    if widest >= REFERENCE_WIDTH:
        assert starts_allowed(PlanContext([REFERENCE_WIDTH], budget=budget, rate=rate), predicted) == allowed


def test_a_larger_allowance_never_predicts_a_worse_plan():
    import math
    import random

    from scalpel_executor.core.orders import FcfsEvaluator
    rnd = random.Random(5)
    tasks = [Task(i, rnd.choice([0.25, 6, 12]) * MiB, rnd.choice([1.0, 2.0, 3.0, 5.0])) for i in range(40)]
    for seq, t in enumerate(tasks):
        t.seq = seq
    ev = FcfsEvaluator([t.runtime for t in tasks], [t.footprint for t in tasks], [None] * 40, [4, 4], 12 * MiB,
                       ContentionModel())
    chooser = Scheduler([[0, 1, 2, 3], [4, 5, 6, 7]], "fifo")._chooser
    predicted = [ev.run(scalpel_order(tasks, PlanContext([4, 4], llc=12 * MiB, rate=rate, chooser=chooser)))
                 for rate in (0, 20, 200, math.inf)]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(predicted, predicted[1:]))
    assert predicted[-1] < predicted[0]  # this batch has something to gain


def test_short_tasks_are_planned_as_plain_longest_first_without_simulating():
    """No-op tasks (predicted makespan near zero) get no model-checked plan: nothing to gain."""
    tasks = [Task(i, footprint=(i % 3) * 20 * MiB, runtime=1e-4 * (1 + i % 5)) for i in range(500)]
    for seq, t in enumerate(tasks):
        t.seq = seq
    traced = []
    context = PlanContext([2, 2], llc=12 * MiB, chooser=lambda policy, ts: traced.append(policy))
    order = scalpel_order(tasks, context)
    assert traced == []  # no base policy was traced
    assert order == sorted(range(500), key=lambda i: (-tasks[i].runtime, i))


def test_the_plan_traces_the_base_policies_when_the_batch_is_long_enough_to_pay():
    tasks = [Task(i, footprint=(i % 3) * 8 * MiB, runtime=1.0 + i % 4) for i in range(12)]
    s = Scheduler([[0, 1, 2, 3], [4, 5, 6, 7]], "scalpel", llc=12 * MiB)
    calls = []
    original = s._chooser
    s._context.chooser = lambda policy, ts: calls.append(policy) or original(policy, ts)
    s.add(tasks)
    s.dispatch()
    assert calls == ["scalpel-paper", "scalpel-lpt"]


def _table2_batch(count, repeat, spread):
    """A Table II batch as benchmarks/scale.py draws it, its estimates told to spread by ``spread``."""
    import dataclasses
    import random

    from scalpel_executor.learning.exchange import load_profile

    _, pool = load_profile("polybench-xeon-e5620")
    rng = random.Random(count * 1009 + repeat)
    return [dataclasses.replace(t, runtime_spread=spread) for t in rng.sample(pool, count)]


def test_uncertain_estimates_keep_longest_first_unless_the_gain_survives_their_spread():
    # Paper machine, default model. On this batch the plan predicts a 0.3% gain over
    # longest-first: with estimates known to be exact (or nearly) it is taken; with estimates that
    # spread by half it cannot be told apart from noise, and longest-first's schedule is kept.
    spec = MACHINES["paper"]
    topology = Topology.from_spec(spec.spec)
    domains = [d.cpus for d in topology.domains]

    def makespans(spread):
        batch = _table2_batch(12, 2, spread)
        return {p: simulate(batch, domains, topology.llc_size, p, model=ContentionModel()).makespan
                for p in ("scalpel", "longest_first")}

    for spread in (0.0, 0.01):
        exact = makespans(spread)
        assert exact["scalpel"] < exact["longest_first"] * (1 - 1e-4)
    rough = makespans(0.5)
    assert rough["scalpel"] == pytest.approx(rough["longest_first"], rel=1e-12)


def test_a_structural_gain_survives_rough_estimates():
    # Keeping the large footprints apart gains 13-24%, which no run-time error of 30% explains
    # away (with the robustness check's share of the allowance set aside, the tail search ends at
    # 9.625 s here rather than the optimum, 9 s).
    result = makespans_of_the_stacking_batch(spread=0.3)
    assert result["scalpel"] < 0.9 * min(result["scalpel-paper"], result["longest_first"])


spreads = st.sampled_from([0.0, 0.05, 0.3, 1.0])


@settings(max_examples=80, deadline=None)
@given(batches, st.sampled_from(TOPOLOGIES), st.lists(spreads, min_size=24, max_size=24))
def test_the_plan_leaves_longest_first_only_for_an_order_that_wins_the_robustness_check(tasks, domains, told):
    import math

    from scalpel_executor.core.planning import ROBUST_SCENARIOS, robust_choice

    plan_tasks = [Task(i, t.footprint, t.solo_time, runtime_spread=s) for i, (t, s) in enumerate(zip(tasks, told))]
    for seq, t in enumerate(plan_tasks):
        t.seq = seq
    context = PlanContext([len(d) for d in domains], llc=12 * MiB, rate=math.inf)  # room for every scenario
    order = scalpel_order(plan_tasks, context)
    n = len(plan_tasks)
    assert sorted(order) == list(range(n))
    lpt = sorted(range(n), key=lambda i: (-plan_tasks[i].runtime, i))
    if order != lpt and any(t.runtime_spread for t in plan_tasks):
        # the same seeded scenarios, the two orders alone: the plan still wins
        again = robust_choice(plan_tasks, [t.runtime_spread for t in plan_tasks], [lpt, order], context, 12 * MiB,
                              budget=ROBUST_SCENARIOS * 3 * n)
        assert again == order
    if not any(t.runtime_spread for t in plan_tasks):
        exact = [Task(i, t.footprint, t.runtime) for i, t in enumerate(plan_tasks)]
        for seq, t in enumerate(exact):
            t.seq = seq
        assert scalpel_order(exact, context) == order


def test_the_robustness_check_picks_a_dominant_order_and_keeps_the_first_when_it_does_not_fit():
    from scalpel_executor.core.planning import robust_choice

    # a 4 s task and four 1 s tasks on two cores: the long one first ends at 4 s, last at 6 s
    tasks = [Task(i, 0.0, r, runtime_spread=0.2) for i, r in enumerate([1.0, 1.0, 4.0, 1.0, 1.0])]
    good, bad = [2, 0, 1, 3, 4], [0, 1, 3, 4, 2]
    context = PlanContext([2])
    spreads = [0.2] * 5
    assert robust_choice(tasks, spreads, [bad, good], context, 12 * MiB, budget=10_000) == good
    assert robust_choice(tasks, spreads, [good, bad], context, 12 * MiB, budget=10_000) == good
    assert robust_choice(tasks, spreads, [good, list(good)], context, 12 * MiB, budget=10_000) == good
    # fewer than ROBUST_MIN_SCENARIOS scenarios fit: nothing is checked, the first order is kept
    assert robust_choice(tasks, spreads, [bad, good], context, 12 * MiB, budget=2 * 5) == bad
    assert robust_choice(tasks, spreads, [good, bad], context, 12 * MiB, budget=2 * 5) == good


def test_a_batch_too_large_to_check_is_dispatched_longest_first_when_estimates_are_uncertain():
    # 400 tasks on 2 x 4 cores, about 5.5 s of predicted makespan: an allowance of about 2,200
    # starts (400 a second on domains of 4 cores), a quarter of it short of 4 scenarios x 2 orders
    # x 400 tasks. With exact estimates the same batch is planned (and here the plan differs from
    # longest-first).
    import random

    from scalpel_executor.core.planning import ROBUST_MIN_SCENARIOS, starts_allowed

    rnd = random.Random(11)
    pairs = [(rnd.choice([0.025, 0.05, 0.1, 0.15]), rnd.choice([0.25, 4, 8, 10])) for _ in range(400)]
    assert starts_allowed(PlanContext([4, 4]), 5.5) // 4 < ROBUST_MIN_SCENARIOS * 2 * 400

    def order_for(spread):
        tasks = [Task(i, f * MiB, r, runtime_spread=spread) for i, (r, f) in enumerate(pairs)]
        for seq, t in enumerate(tasks):
            t.seq = seq
        return scalpel_order(tasks, PlanContext([4, 4], llc=12 * MiB))

    lpt = sorted(range(400), key=lambda i: (-pairs[i][0], i))
    assert order_for(0.0) != lpt
    assert order_for(0.05) == lpt
