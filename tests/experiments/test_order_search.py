"""The oracle search and the retired rollout, on the default policy's evaluator."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.experiments.order_search import best_schedule, rollout_order

from tests.core.order_batches import TOPOLOGIES, MiB, evaluator, sim_tasks


@settings(max_examples=40, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.integers(0, 3000))
def test_rollout_never_predicts_worse_than_its_base_and_more_budget_never_hurts(tasks, domains, budget):
    ev = evaluator(tasks, domains)
    base = list(range(len(tasks)))
    small = rollout_order(ev, base=base, window=4, budget=budget)
    large = rollout_order(ev, base=base, window=4, budget=budget + 2000)
    assert sorted(small) == base
    assert ev.run(small) <= ev.run(base) * (1 + 1e-9)
    assert ev.run(large) <= ev.run(small) * (1 + 1e-9)


def test_rollout_stops_when_its_budget_is_spent():
    tasks = [SimTask(f"t{i}", 1.0 + i % 5, (i % 4) * 6 * MiB) for i in range(40)]
    ev = evaluator(tasks, [[0, 1, 2, 3], [4, 5, 6, 7]])
    before = ev.starts
    rollout_order(ev, window=8, budget=500)
    # the budget is checked before each position: one position (8 tails of at most 40 tasks) may overshoot it
    assert ev.starts - before <= 500 + 9 * 40
    unlimited = evaluator(tasks, [[0, 1, 2, 3], [4, 5, 6, 7]])
    rollout_order(unlimited, window=8)
    assert unlimited.starts > ev.starts - before


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0]), st.sampled_from([0.25, 6, 12])), min_size=2, max_size=7),
       st.sampled_from(TOPOLOGIES[:3]))
def test_oracle_is_optimal_on_small_batches_and_beats_every_policy(pairs, domains):
    tasks = [SimTask(f"t{i}", r, f * MiB) for i, (r, f) in enumerate(pairs)]
    ev = evaluator(tasks, domains)
    seeds = [list(range(len(tasks)))]
    result = best_schedule(ev, seeds)
    assert result.proven and result.method.startswith("branch and bound")
    for policy in ("fifo", "longest_first", "scalpel-paper", "scalpel"):
        assert result.makespan <= simulate(tasks, domains, 12 * MiB, policy).makespan * (1 + 1e-9)
    assert result.makespan >= result.lower_bound * (1 - 1e-9)
    assert ev.run(result.order) == pytest.approx(result.makespan, rel=1e-9)
    # exhaustive check on the smallest: no permutation beats the proven optimum
    if len(tasks) <= 5:
        best = min(ev.run(list(p)) for p in itertools.permutations(range(len(tasks))))
        assert result.makespan == pytest.approx(best, rel=1e-9)


def test_oracle_says_when_it_only_searched_locally():
    rnd = random.Random(3)
    tasks = [SimTask(f"t{i}", rnd.choice([1.0, 2.0, 4.0]), rnd.choice([0.25, 6, 12]) * MiB) for i in range(30)]
    ev = evaluator(tasks, [[0, 1, 2, 3], [4, 5, 6, 7]])
    seed = sorted(range(30), key=lambda i: -tasks[i].solo_time)
    result = best_schedule(ev, [seed], local_evals=200)
    assert not result.proven and result.method == "local search (best found)"
    assert result.makespan <= ev.run(seed) * (1 + 1e-12)
    assert 0 < result.evaluations <= 201
    with pytest.raises(ValueError, match="seed order"):
        best_schedule(ev, [])
