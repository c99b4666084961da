import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor import POLICIES, ContentionModel, SimTask, simulate
from scalpel_executor.core.simulate import lower_bound

MiB = 2**20
ONE_DOMAIN = [[0, 1]]
XEON = [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_model_matches_the_pairs_it_was_fitted_to():
    model = ContentionModel()  # rho 0.5 of a 32 MiB L3, sigma 1
    llc = 32 * MiB
    assert model.slowdowns([20 * MiB, 20 * MiB], [1, 1], llc) == pytest.approx([1.4, 1.4])
    assert model.slowdowns([12 * MiB, 12 * MiB], [1, 1], llc) == pytest.approx([4 / 3, 4 / 3])
    assert model.slowdowns([1 * MiB, 1 * MiB], [1, 1], llc) == [1.0, 1.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e9), min_size=1, max_size=8), st.floats(0, 3), st.floats(0.05, 2))
def test_model_never_speeds_a_task_up(footprints, sigma, rho):
    factors = ContentionModel(rho, sigma).slowdowns(footprints, [sigma] * len(footprints), 32 * MiB)
    assert all(f >= 1.0 - 1e-12 for f in factors)


def test_no_contention_one_task_per_core_is_the_longest_task():
    tasks = [SimTask("a", 3.0), SimTask("b", 5.0)]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo")
    assert result.makespan == pytest.approx(5.0)
    assert result.lower_bound == pytest.approx(5.0)


def test_contending_pair_runs_slower_than_alone():
    tasks = [SimTask("a", 10.0, 20 * MiB), SimTask("b", 10.0, 20 * MiB)]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo")
    assert result.makespan == pytest.approx(14.0)
    assert all(r.slowdown == pytest.approx(1.4) for r in result.records)


def test_rates_change_when_a_co_runner_ends():
    # b finishes at 2 s while slowed to 1/1.4 speed, then a runs alone at full speed.
    tasks = [SimTask("a", 10.0, 20 * MiB), SimTask("b", 2.0 / 1.4, 20 * MiB)]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo")
    a = next(r for r in result.records if r.name == "a")
    assert a.end == pytest.approx(2.0 + (10.0 - 2.0 / 1.4))


def test_grouping_separates_large_footprints_on_two_domains():
    # Two 20 MiB and two tiny tasks on 2 domains x 2 cores: pairing big with tiny avoids contention.
    # Idle cores are served round-robin over domains, so this order puts both big tasks on domain 0.
    tasks = [SimTask("big1", 10, 20 * MiB), SimTask("t1", 10, 0.1 * MiB), SimTask("big2", 10, 20 * MiB), SimTask("t2", 10, 0.1 * MiB)]
    scalpel = simulate(tasks, [[0, 1], [2, 3]], 32 * MiB, "scalpel")
    fifo = simulate(tasks, [[0, 1], [2, 3]], 32 * MiB, "fifo")
    assert scalpel.makespan == pytest.approx(10.0, rel=0.02)
    assert fifo.makespan == pytest.approx(14.0)


def test_arrivals_start_later():
    tasks = [SimTask("early", 1.0), SimTask("late", 1.0, arrival=5.0)]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "scalpel")
    late = next(r for r in result.records if r.name == "late")
    assert late.start == pytest.approx(5.0) and result.makespan == pytest.approx(6.0)


@settings(max_examples=120, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    shape=st.sampled_from([[[0, 1]], XEON, [[0, 1, 2], [3]]]),
    specs=st.lists(st.tuples(st.floats(0.01, 50), st.floats(0, 40 * MiB)), min_size=1, max_size=30),
)
def test_makespan_never_beats_the_lower_bound(policy, shape, specs):
    tasks = [SimTask(f"t{i}", t, f) for i, (t, f) in enumerate(specs)]
    result = simulate(tasks, shape, 12 * MiB, policy)
    assert len(result.records) == len(tasks)
    assert result.makespan >= result.lower_bound * (1 - 1e-9)
    assert 0 < result.utilisation <= 1 + 1e-9


def test_lower_bound():
    assert lower_bound([1, 1, 1, 1], 2) == 2
    assert lower_bound([10, 1], 2) == 10


def test_bad_inputs():
    with pytest.raises(ValueError, match="solo_time"):
        SimTask("x", -1.0)
    for bad in (-0.1, float("nan"), float("inf"), "0.3"):
        with pytest.raises(ValueError, match="runtime_spread"):
            SimTask("x", 1.0, runtime_spread=bad)
    with pytest.raises(ValueError, match="footprint"):
        SimTask("x", 1.0, float("nan"))
    with pytest.raises(ValueError, match="llc_size"):
        simulate([SimTask("x", 1.0)], ONE_DOMAIN, 0)
    with pytest.raises(ValueError, match="capacity_fraction"):
        ContentionModel(0)


def test_simulate_drives_a_given_scheduler_reports_the_dispatch_order_and_the_clock():
    from scalpel_executor.core.scheduler import Scheduler
    tasks = [SimTask("a", 1.0), SimTask("b", 3.0), SimTask("c", 2.0)]
    times = []
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo", scheduler=Scheduler(ONE_DOMAIN, "longest_first"),
                      on_time=times.append)
    assert result.order == [1, 2, 0]  # longest first, from the scheduler given, not the policy named
    assert result.makespan == pytest.approx(3.0)
    assert times and times == sorted(times) and times[-1] == pytest.approx(3.0)


@pytest.mark.parametrize("malleable", [True, False])
def test_malleable_tasks_ending_at_one_instant_on_several_domains_all_end_before_anything_starts(malleable):
    """As the live pool reads every result that is ready in one pass before it dispatches, so that
    the cores the first end frees are not filled before the others' readings are heard; ends of
    fixed-width tasks are taken one at a time, as the plan's evaluators (core.orders) foresee them."""
    from scalpel_executor.core.scheduler import Scheduler
    calls = []

    class Traced(Scheduler):
        def release(self, slot, now=None):
            calls.append(("release", now))
            return super().release(slot, now)

        def dispatch(self, now=None):
            started = super().dispatch(now)
            calls.append(("dispatch", now))
            return started

    two = [[0], [1]]
    first = [SimTask(name, 2.0, max_cores=2 if malleable else None, key=name) for name in "ab"]
    tasks = [*first, SimTask("c", 1.0), SimTask("d", 1.0)]
    result = simulate(tasks, [[0, 1], [2, 3]] if malleable else two, 32 * MiB, "fifo",
                      scheduler=Traced([[0, 1], [2, 3]] if malleable else two, "fifo"))
    at_two = [what for what, at in calls if at == pytest.approx(2.0)]
    assert at_two == (["release", "release", "dispatch"] if malleable
                      else ["release", "dispatch", "release", "dispatch"])
    assert result.makespan == pytest.approx(3.0)


# ---- DAG arrivals: a task with parents starts only after every one of them has ended ----

@st.composite
def dags(draw, max_tasks=24):
    """Tasks with parents drawn among the tasks before them in a hidden order, then listed in a
    shuffled order, so parents point both forward and backward in the list."""
    count = draw(st.integers(1, max_tasks))
    specs = draw(st.lists(st.tuples(st.floats(0.01, 20), st.floats(0, 30 * MiB), st.sampled_from([0.0, 0.0, 3.0])),
                          min_size=count, max_size=count))
    position = draw(st.permutations(range(count)))  # position[k]: where the k-th task of the hidden order is listed
    tasks = [None] * count
    for k, (solo, footprint, arrival) in enumerate(specs):
        earlier = draw(st.lists(st.integers(0, k - 1), max_size=3, unique=True)) if k else []
        tasks[position[k]] = SimTask(f"t{position[k]}", solo, footprint, arrival=arrival,
                                     parents=tuple(position[j] for j in earlier))
    return tasks


@settings(max_examples=150, deadline=None)
@given(policy=st.sampled_from(sorted(POLICIES)), shape=st.sampled_from([[[0, 1]], XEON, [[0, 1, 2], [3]]]),
       tasks=dags(), batched=st.booleans())
def test_no_task_starts_before_every_parent_ended_and_every_task_ends_once(policy, shape, tasks, batched):
    from scalpel_executor.core.batching import Batching

    result = simulate(tasks, shape, 12 * MiB, policy, batching=Batching() if batched else None)
    by_name = {r.name: r for r in result.records}
    assert len(result.records) == len(by_name) == len(tasks)
    assert sorted(result.order) == list(range(len(tasks)))
    for task in tasks:
        record = by_name[task.name]
        assert record.start >= task.arrival - 1e-9
        for parent in task.parents:
            assert record.start >= by_name[tasks[parent].name].end - 1e-9
    assert result.makespan >= result.lower_bound * (1 - 1e-9)


def test_a_chain_runs_in_order_whatever_its_listing():
    # c <- a <- d <- b: listed out of order, run one after the other though four cores are free.
    tasks = [SimTask("a", 1.0, parents=(2,)), SimTask("b", 4.0, parents=(3,)), SimTask("c", 2.0),
             SimTask("d", 3.0, parents=(0,))]
    result = simulate(tasks, XEON, 12 * MiB, "scalpel")
    records = sorted(result.records, key=lambda r: r.start)
    assert [r.name for r in records] == ["c", "a", "d", "b"]
    assert all(later.start == pytest.approx(earlier.end) for earlier, later in zip(records, records[1:]))
    assert result.makespan == pytest.approx(10.0) and result.lower_bound == pytest.approx(10.0)  # the chain


def test_a_child_released_before_its_arrival_waits_for_it():
    tasks = [SimTask("parent", 1.0), SimTask("child", 1.0, arrival=5.0, parents=(0,)),
             SimTask("sibling", 1.0, parents=(0,))]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "longest_first")
    start = {r.name: r.start for r in result.records}
    assert start == pytest.approx({"parent": 0.0, "sibling": 1.0, "child": 5.0})


def test_parents_that_name_no_task_the_task_itself_or_a_cycle_are_refused():
    with pytest.raises(ValueError, match=r"task 'b' \(index 1\): parent 5 is not a task; .* 0 to 1"):
        simulate([SimTask("a", 1.0), SimTask("b", 1.0, parents=(5,))], ONE_DOMAIN, 32 * MiB)
    with pytest.raises(ValueError, match=r"task 'a' \(index 0\) names itself as a parent; remove 0"):
        simulate([SimTask("a", 1.0, parents=(0,))], ONE_DOMAIN, 32 * MiB)
    cycle = [SimTask("root", 1.0), SimTask("x", 1.0, parents=(0, 3)), SimTask("y", 1.0, parents=(1,)),
             SimTask("z", 1.0, parents=(2,))]
    with pytest.raises(ValueError, match=r"'x' \(1\) -> 'y' \(2\) -> 'z' \(3\) -> 'x' \(1\) form a cycle"):
        simulate(cycle, ONE_DOMAIN, 32 * MiB)
    for bad in (-1, 1.0, True, "0"):
        with pytest.raises(ValueError, match="parents must be"):
            SimTask("x", 1.0, parents=bad if bad == "0" else (bad,))
    assert SimTask("x", 1.0, parents=[2, 1]).parents == (2, 1)


# ---- interference residuals: the truth the simulator runs, and what the scheduler is told ----

def test_true_residuals_slow_the_tasks_the_footprint_model_calls_free():
    # A stream (pressure 0.4) beside a lookup (sensitivity 0.1), both 1 MiB: by footprint 1x each.
    tasks = [SimTask("stream", 10.0, MiB, interference=(0.0, 0.4)), SimTask("lookup", 10.0, MiB, interference=(0.1, 0.0))]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo")
    slowdown = {r.name: r.slowdown for r in result.records}
    assert slowdown["stream"] == pytest.approx(1.0)  # the lookup presses nothing, the stream is not sensitive
    assert slowdown["lookup"] == pytest.approx((10.0 + (10.0 - 10.0 / math.exp(0.5))) / 10.0)  # 1.65x until 10 s


def test_the_scheduler_is_told_only_told_interference():
    """Two streams and two lookups on 2 x 2 cores: told nothing, the plan deals them as submitted
    (streams together, 2.01x); told the truth, it keeps the streams apart (each 1.35x beside a
    lookup, which runs 1.49x until its stream ends)."""
    def batch(told):
        return [SimTask(name, 4.0, MiB, interference=(0.3, 0.4) if name.startswith("stream") else None,
                        told_interference=(0.3, 0.4) if told and name.startswith("stream") else None)
                for name in ("stream0", "lookup0", "stream1", "lookup1")]
    untold = simulate(batch(False), [[0, 1], [2, 3]], 32 * MiB, "scalpel")
    told = simulate(batch(True), [[0, 1], [2, 3]], 32 * MiB, "scalpel")
    assert untold.makespan == pytest.approx(4.0 * math.exp(0.7))
    stream_end = 4.0 * math.exp(0.3)
    assert told.makespan == pytest.approx(stream_end + 4.0 - stream_end / math.exp(0.4))


@pytest.mark.parametrize("bad", [(0.1,), (0.1, float("nan")), "ab", (0.1, True), 0.3, (0.1, 0.2, 0.3, 0.4)])
def test_interference_that_is_not_two_or_three_finite_numbers_is_refused(bad):
    with pytest.raises(ValueError, match=r"interference must be None or \(sensitivity, pressure\[, bandwidth\]\)"):
        SimTask("x", 1.0, interference=bad)
    with pytest.raises(ValueError, match="told_interference must be None"):
        SimTask("x", 1.0, told_interference=bad)
    assert SimTask("x", 1.0, interference=[0, 1]).interference == (0.0, 1.0, 0.0)


def test_with_a_prior_the_scheduler_is_told_run_times_as_a_first_runs_executor_learns_them():
    """``prior``: a key none of whose tasks has ended carries the guess (spread of the prior); a task
    arriving after one of its key ended, the mean of their times (spread of a key seen once)."""
    from scalpel_executor.core.admission import GUESSED_SPREAD, ONE_RUN_SPREAD
    from scalpel_executor.core.scheduler import Scheduler

    told = []

    class Told(Scheduler):
        def add(self, tasks):
            tasks = list(tasks)
            told.extend((t.payload.name, t.runtime, t.runtime_spread) for t in tasks)
            super().add(tasks)

    tasks = [SimTask("a", 3.0, 1 * MiB, key="k"), SimTask("c", 2.0, 1 * MiB, key="j"),
             SimTask("b", 5.0, 1 * MiB, key="k", parents=(0,))]
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, scheduler=Told(ONE_DOMAIN, llc=32 * MiB), prior=1.0)
    assert sorted(told) == [("a", 1.0, GUESSED_SPREAD), ("b", pytest.approx(3.0), ONE_RUN_SPREAD),
                            ("c", 1.0, GUESSED_SPREAD)]
    assert result.makespan == pytest.approx(8.0)  # the truth runs, whatever was told
    told.clear()
    simulate(tasks, ONE_DOMAIN, 32 * MiB, scheduler=Told(ONE_DOMAIN, llc=32 * MiB))
    assert sorted(told) == [("a", 3.0, 0.0), ("b", 5.0, 0.0), ("c", 2.0, 0.0)]  # no prior: each estimate
    for bad in (0, -1.0, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match="prior must be a positive number of seconds"):
            simulate(tasks, ONE_DOMAIN, 32 * MiB, prior=bad)
