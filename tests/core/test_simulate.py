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
    result = simulate(tasks, ONE_DOMAIN, 32 * MiB, "fifo", scheduler=Scheduler(ONE_DOMAIN, "longer_first"),
                      on_time=times.append)
    assert result.order == [1, 2, 0]  # longest first, from the scheduler given, not the policy named
    assert result.makespan == pytest.approx(3.0)
    assert times and times == sorted(times) and times[-1] == pytest.approx(3.0)
