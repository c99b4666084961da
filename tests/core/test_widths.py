"""Widths of malleable tasks (core.widths): the speed-up model and the width choice."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import widths
from scalpel_executor.core.widths import (Outlook, Peer, SpeedupModel, Widths, allot, amdahl, choose_width,
                                          equipartition, serial_fraction_from, shaped_sizes)

serial_fractions = st.floats(0.0, 1.0)


def _end(width, low, runtime, tail, serial, outlook):
    """The predicted end of a task started alone at ``width`` (no malleable peers waiting)."""
    own = runtime * amdahl(serial, width) / amdahl(serial, low)
    return max(own + tail, (outlook.backlog + width * own) / outlook.cores)
domain_sizes = st.sampled_from([1, 2, 4, 6, 8, 12, 16])


@st.composite
def situations(draw):
    """A malleable task's range, estimate, tail and key fit, and the node it starts on."""
    domain = draw(domain_sizes)
    domains = draw(st.integers(1, 16))
    low = draw(st.integers(1, domain))
    high = draw(st.integers(low, 2 * domain))
    free = draw(st.integers(low, domain))
    outlook = Outlook(cores=domain * domains, domain_cores=domain, free=free,
                      backlog=draw(st.floats(0, 1e6)),
                      malleable=draw(st.integers(1, 500)))
    return dict(low=low, high=high, runtime=draw(st.floats(1e-3, 1e4)), tail=draw(st.floats(0, 1e4)),
                serial=draw(serial_fractions), readings=draw(st.integers(0, 5)), outlook=outlook,
                previous=draw(st.none() | st.integers(1, domain)), shaped=draw(st.booleans()))


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(situations())
def test_a_width_is_within_the_task_range_and_the_domain_free_cores(case):
    outlook = case["outlook"]
    choice = choose_width(case["low"], case["high"], case["runtime"], case["tail"],
                          case["serial"], case["readings"], outlook, previous=case["previous"], shaped=case["shaped"])
    assert case["low"] <= choice.width <= max(case["low"], min(case["high"], outlook.free))
    assert choice.reason in widths.REASONS
    for shaped in (False, True):
        plain = equipartition(case["low"], case["high"], outlook, shaped=shaped)
        assert case["low"] <= plain.width <= max(case["low"], min(case["high"], outlook.free))


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(situations())
def test_a_shaped_width_divides_the_domain_or_is_the_task_narrowest(case):
    outlook = case["outlook"]
    choice = choose_width(case["low"], case["high"], case["runtime"], case["tail"], case["serial"], case["readings"],
                          outlook, previous=case["previous"], shaped=True)
    assert outlook.domain_cores % choice.width == 0 or choice.width == case["low"]


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(situations())
def test_a_key_that_does_not_speed_up_runs_narrow_once_it_is_sure(case):
    outlook = case["outlook"]
    choice = choose_width(case["low"], case["high"], case["runtime"], case["tail"], 1.0, widths.SURE_AFTER, outlook,
                          shaped=case["shaped"])
    assert choice.width == case["low"]


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(situations())
def test_the_chosen_width_ends_within_the_tie_and_hysteresis_of_the_soonest_end(case):
    outlook = case["outlook"]
    sure = widths.SURE_AFTER
    choice = choose_width(case["low"], case["high"], case["runtime"], case["tail"], case["serial"], sure, outlook,
                          previous=case["previous"], shaped=case["shaped"])
    cap = max(case["low"], min(case["high"], outlook.free))
    ends = [_end(w, case["low"], case["runtime"], case["tail"], case["serial"], outlook)
            for w in range(case["low"], cap + 1)
            if not case["shaped"] or w == case["low"] or outlook.domain_cores % w == 0]
    if len(ends) > 1:
        assert choice.ends <= min(ends) * (1 + widths.HYSTERESIS) + 1e-9


def test_many_waiting_keeps_a_parallel_task_narrow_and_the_tail_makes_it_wide():
    crowded = Outlook(cores=16, domain_cores=8, free=8, backlog=16 * 100.0)
    assert choose_width(1, 8, 10.0, 0.0, 0.1, 3, crowded) == widths.WidthChoice(1, widths.MANY_WAITING,
                                                                                 pytest.approx(100.0 + 10 / 16))
    tail = Outlook(cores=16, domain_cores=8, free=8, backlog=0.0)
    choice = choose_width(1, 8, 10.0, 0.0, 0.1, 3, tail)
    assert (choice.width, choice.reason) == (8, widths.TAIL)
    assert choice.ends == pytest.approx(10.0 * amdahl(0.1, 8))


def test_a_task_with_a_long_chain_after_it_starts_wide_on_the_critical_path():
    outlook = Outlook(cores=16, domain_cores=8, free=8, backlog=16 * 30.0)
    assert choose_width(1, 8, 10.0, 0.0, 0.1, 3, outlook).width == 1  # the backlog decides: narrow
    choice = choose_width(1, 8, 10.0, 100.0, 0.1, 3, outlook)
    assert (choice.width, choice.reason) == (8, widths.CRITICAL_PATH)


def test_a_waiting_task_that_ends_later_anyway_keeps_the_task_narrow():
    outlook = Outlook(cores=16, domain_cores=8, free=8, backlog=0.0, peers=(Peer(50.0, 0.0, 1.0, 1, 1),))
    assert choose_width(1, 8, 10.0, 0.0, 0.1, 3, outlook) == widths.WidthChoice(1, widths.OTHERS_LONGER, 50.0)


def test_a_long_running_task_does_not_keep_a_task_with_a_chain_behind_it_narrow():
    """What runs counts as core-seconds left (the backlog), not as an end no width moves: a running
    task's chain runs through tasks still to be planned, which that end would leave narrow (1000genome
    on ``epyc``: 13 of 16 merges, serial fraction 0.02, on one core each, 0.58x the best fixed width)."""
    outlook = Outlook(cores=128, domain_cores=8, free=8, backlog=127 * 60.0)
    choice = choose_width(1, 8, 160.0, 40.0, 0.02, 3, outlook)
    assert (choice.width, choice.reason) == (8, widths.CRITICAL_PATH)


def test_an_unsure_key_explores_only_where_no_gain_would_cost_little():
    idle = Outlook(cores=16, domain_cores=8, free=8, backlog=0.0)
    assert choose_width(1, 8, 10.0, 0.0, 1.0, 0, idle).reason == widths.EXPLORING
    assert choose_width(1, 8, 10.0, 0.0, 1.0, 0, idle, may_explore=False) == widths.WidthChoice(1, widths.NO_SPEEDUP,
                                                                                                  10.0)
    # the node nearly full of work: eight cores of no gain would end it 10 x 7 / 16 s later
    busy = Outlook(cores=16, domain_cores=8, free=8, backlog=16 * 10.0 - 10.0)
    assert choose_width(1, 8, 10.0, 0.0, 1.0, 0, busy).width == 1
    assert choose_width(1, 8, 10.0, 0.0, 1.0, widths.SURE_AFTER, idle).reason == widths.NO_GAIN


def test_an_exploration_counts_the_chain_after_the_tasks_it_would_keep_waiting():
    """Five splits of an unsure key, 880 s each on one core, on a 16-core domain, each with a chain
    of about 200 s: alone, the first explores the whole domain (idle cores make it free); beside
    the four waiting, no gain there would hold them and their chains behind it, so it explores only
    as wide as leaves a core to each (a first Epigenomics run on ``xeon16`` ran its splits one after
    another so, 0.672x as soon as every task on two cores)."""
    alone = Outlook(cores=16, domain_cores=16, free=16, backlog=0.0)
    assert choose_width(1, 16, 880.0, 211.0, 1.0, 0, alone) == widths.WidthChoice(16, widths.EXPLORING, 1091.0)
    for waiting in (4, 12):
        splits = (Peer(880.0, 204.0, 1.0, 1, 16, sure=False, key="split", seen=False),) * waiting
        beside = dataclasses.replace(alone, malleable=waiting + 1, peers=splits)
        choice = choose_width(1, 16, 880.0, 211.0, 1.0, 0, beside)
        assert choice.width + waiting <= 16
        # at no gain, it ends with its chain as on one core: the waiting splits run beside it
        assert choice.ends == pytest.approx(880.0 + 211.0)

def test_an_exploration_takes_no_core_the_waiting_tasks_would_start_on_now():
    """Five splits of an unsure key, 878 s each, planned at two cores on a 16-core domain: the first
    explored eight cores, beside which the four others fit. The second, with eight cores free and
    three splits planned at two cores each waiting, explores no wider than leaves them theirs: the
    first's reading comes anyway, and at eight the three waited for a second round (a first
    Epigenomics run on ``xeon16`` so ended 0.771x as soon as every task on two cores), which the
    pool of core-seconds does not see. The first try of a key is not held so."""
    splits = (Peer(878.0, 231.0, 1.0, 1, 16, sure=False, key="split", seen=False),) * 3
    beside = Outlook(cores=16, domain_cores=16, free=8, backlog=878.0, malleable=5, peers=splits, planned=6)
    assert choose_width(2, 16, 878.0, 243.0, 1.0, 0, beside, exploring=1) == widths.WidthChoice(
        2, widths.NO_SPEEDUP, 1121.0)
    # not planned yet, they need their narrowest, a core each: it explores four of the eight
    assert choose_width(2, 16, 878.0, 243.0, 1.0, 0, dataclasses.replace(beside, planned=0), exploring=1).width == 4
    # eight cores free on another domain hold them: it explores all eight here
    elsewhere = dataclasses.replace(beside, free_elsewhere=8)
    assert choose_width(2, 16, 878.0, 243.0, 1.0, 0, elsewhere, exploring=1) == widths.WidthChoice(
        8, widths.EXPLORING, 1121.0)
    assert choose_width(2, 16, 878.0, 243.0, 1.0, 0, beside, exploring=0).width == 8  # the key's first try


def test_a_task_planned_wider_than_its_narrowest_hopes_from_there_and_reads_its_key_without_a_try():
    """The longest task of a batch, 12 s on one core, planned at four cores (its estimate there its
    key's fit, no gain: 12 s), beside 30 others on a 16-core domain. Perfectly parallel, four cores
    would end it within the backlog's spread: its hope, scaled from its narrowest. Scaled from the
    planned width it was eight; and a start at four reads the key anyway, so no size up is tried.
    (A first run of batch-2 on ``xeon16``, seed 600, explored such a task on eight cores, its serial
    fraction 0.204: 27 core-seconds for an 11 s task, and ended 7.90 s, 7.28 s so.)"""
    others = (Peer(2.4, 0.0, 1.0, 1, 16, sure=False, key="other", seen=False),) * 30
    outlook = Outlook(cores=16, domain_cores=16, free=16, backlog=0.0, malleable=31, peers=others)
    planned = choose_width(4, 16, 12.0, 0.0, 1.0, 0, outlook, narrowest=(1, 12.0))
    assert planned.width == 4 and planned.reason != widths.EXPLORING
    assert choose_width(1, 16, 12.0, 0.0, 1.0, 0, outlook) == widths.WidthChoice(4, widths.EXPLORING, 12.0)
    # its narrowest four cores: a start there reads nothing, and the next size up is tried
    assert choose_width(4, 16, 12.0, 0.0, 1.0, 0, outlook, narrowest=(4, 12.0)) == widths.WidthChoice(
        8, widths.EXPLORING, 12.0)
    assert choose_width(4, 16, 12.0, 0.0, 1.0, 0, outlook).width == 8  # no narrowest told: ``low`` is it


def test_the_previous_width_is_kept_within_the_hysteresis_and_left_beyond_it():
    # a perfectly parallel key with a backlog of 3 s per core: widths 4 and 8 end together, 2 later
    outlook = Outlook(cores=8, domain_cores=8, free=8, backlog=24.0)
    assert choose_width(1, 8, 10.0, 0.0, 0.0, 3, outlook) == widths.WidthChoice(4, widths.TAIL, 4.25)
    assert choose_width(1, 8, 10.0, 0.0, 0.0, 3, outlook, previous=8) == widths.WidthChoice(8, widths.KEPT, 4.25)
    assert choose_width(1, 8, 10.0, 0.0, 0.0, 3, outlook, previous=2).width == 4  # 5 s against 4.25 s
    # a previous wide width that ends nearly as soon but wastes cores is left (many waiting)
    crowded = Outlook(cores=8, domain_cores=8, free=8, backlog=8 * 100.0)
    far = choose_width(1, 8, 10.0, 0.0, 0.05, 3, crowded, previous=8)
    assert far.ends * (1 + widths.HYSTERESIS) > _end(8, 1, 10.0, 0.0, 0.05, crowded)
    assert (far.width, far.reason) == (1, widths.MANY_WAITING)


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(st.floats(0.0, 1.0), st.integers(1, 8), st.integers(1, 64))
def test_a_reading_recovers_the_serial_fraction_that_made_it(serial, narrowest, width):
    ratio = amdahl(serial, width) / amdahl(serial, narrowest)
    reading = serial_fraction_from(ratio, narrowest, width)
    if width == narrowest:
        assert reading is None
    else:
        assert reading == pytest.approx(serial, abs=1e-6)


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(st.lists(st.tuples(st.integers(2, 16), serial_fractions), min_size=1, max_size=20), serial_fractions)
def test_the_fit_is_shrunk_toward_no_gain_and_moves_toward_the_readings(readings, _):
    model = SpeedupModel()
    assert model.serial_fraction("k") == 1.0  # never seen wider: no gain
    for width, serial in readings:
        model.observe("k", 1, width, amdahl(serial, width))
    mean = sum(s for _, s in readings) / len(readings)
    fitted = model.serial_fraction("k")
    assert min(mean, 1.0) - 1e-9 <= fitted <= 1.0
    assert fitted == pytest.approx((mean * len(readings) + widths.SHRINK) / (len(readings) + widths.SHRINK))
    assert model.serial_fraction("other") == 1.0


def test_runs_at_the_narrowest_width_teach_nothing_about_the_speed_up():
    model = SpeedupModel()
    model.observe("k", 2, 2, 0.9)
    assert model.readings("k") == 0 and model.serial_fraction("k") == 1.0


@pytest.mark.parametrize("domain, sizes", [(1, [1]), (4, [1, 2, 4]), (6, [1, 2, 3, 6]), (8, [1, 2, 4, 8]),
                                           (12, [1, 2, 3, 4, 6, 12]), (7, [1, 7])])
def test_shaped_sizes_are_the_divisors_of_the_domain(domain, sizes):
    assert shaped_sizes(domain) == sizes


def test_plain_equipartitioning_splits_the_node_evenly_and_the_shaped_one_rounds_to_a_divisor():
    outlook = Outlook(cores=16, domain_cores=8, free=8, backlog=0.0, malleable=3)
    assert equipartition(1, 8, outlook).width == 5
    assert equipartition(1, 8, outlook, shaped=True).width == 4
    assert equipartition(1, 8, Outlook(cores=16, domain_cores=8, free=2, backlog=0.0, malleable=1)).width == 2


def test_the_rule_learns_from_runs_and_names_unknown_rules():
    rule = Widths()
    idle = Outlook(cores=8, domain_cores=8, free=8, backlog=0.0)
    for _ in range(3):
        rule.observe("blas", 1, 4, 10.0 * amdahl(0.1, 4), 10.0)
    assert rule.model.serial_fraction("blas") == pytest.approx((0.3 + widths.SHRINK) / (3 + widths.SHRINK))
    assert rule.choose("blas", 1, 8, 10.0, 0.0, idle).width == 8
    assert rule.choose("io", 1, 8, 10.0, 0.0, Outlook(cores=8, domain_cores=8, free=8, backlog=70.0)).width == 1
    with pytest.raises(ValueError, match="unknown width rule 'widest'; choose from scalpel, "):
        Widths("widest")
    assert math.isnan(widths.WidthChoice(1, widths.TAIL).ends)


@st.composite
def peer_sets(draw):
    domain = draw(domain_sizes)
    peers = []
    for _ in range(draw(st.integers(1, 30))):
        low = draw(st.integers(1, domain))
        peers.append(Peer(draw(st.floats(1e-3, 1e3)), draw(st.floats(0, 1e3)), draw(serial_fractions), low,
                          draw(st.integers(low, 2 * domain))))
    return peers, domain, domain * draw(st.integers(1, 8)), draw(st.floats(0, 1e4)), draw(st.booleans())


def _allotted_end(peers, allotted, cores, backlog):
    owns = [p.runtime * amdahl(p.serial, w) / amdahl(p.serial, p.low) for p, w in zip(peers, allotted)]
    return max(max(o + p.tail for o, p in zip(owns, peers)), (backlog + sum(w * o for w, o in zip(allotted, owns))) / cores)


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(peer_sets())
def test_an_allotment_stays_in_each_range_and_ends_no_later_than_every_task_at_its_narrowest(case):
    peers, domain, cores, backlog, shaped = case
    allotted, latest, area = allot(peers, cores, domain, backlog, shaped=shaped)
    for peer, width in zip(peers, allotted):
        assert peer.low <= width <= max(peer.low, min(peer.high, domain))
        assert width == peer.low or not shaped or domain % width == 0
    narrow = _allotted_end(peers, [p.low for p in peers], cores, backlog)
    assert _allotted_end(peers, allotted, cores, backlog) <= narrow * (1 + 1e-9)
    assert max(latest, area / cores) == pytest.approx(_allotted_end(peers, allotted, cores, backlog))


def test_the_allotment_widens_the_longest_task_until_the_area_binds():
    peers = [Peer(40.0, serial=0.0, high=8), *[Peer(5.0, serial=0.0, high=8)] * 8]
    allotted, latest, area = allot(peers, 16, 8, 0.0)
    assert allotted == [8, 1, 1, 1, 1, 1, 1, 1, 1]  # 40 s on 8 cores: 5 s, the area's 80 / 16
    assert latest == 5.0 and area == 80.0
    # with a serial fraction the longest stops where the next size would cost more area than it saves
    allotted, latest, area = allot([Peer(40.0, serial=0.5, high=8), *[Peer(5.0, serial=0.5, high=8)] * 8], 16, 8, 0.0)
    assert allotted[0] == 8 and latest == pytest.approx(40.0 * amdahl(0.5, 8))


def test_a_task_no_width_moves_whose_chain_ends_last_leaves_the_others_widened_for_their_own_run_times():
    """A 3 s task with a 154 s chain ends last at any width; a 98 s alignment with a 42 s chain
    ends 141 s on one core, before it, though its own seconds outlast the area (about 10 s on 128
    cores) ninefold. The chain's tasks are allotted when they arrive, so the chain ends sooner than
    told: the alignment is widened for its own run time, the short task whose own seconds end
    within the area is not. (On the previous rule the allotment stopped at the widest task and
    left the alignment on one core.)"""
    short_chain, alignment = Peer(2.9, 153.5, 0.3, 1, 8), Peer(98.4, 42.1, 0.025, 1, 8)
    short = Peer(4.1, 64.9, 0.1, 1, 8)
    allotted, latest, area = allot([short_chain, alignment, short], 128, 8, 1200.0)
    assert allotted == [8, 8, 1]
    assert latest == pytest.approx(2.9 * amdahl(0.3, 8) + 153.5)  # the widest task's end still stands
    assert area == pytest.approx(1200.0 + 8 * 2.9 * amdahl(0.3, 8) + 8 * 98.4 * amdahl(0.025, 8) + 4.1)
    assert area / 128 < 98.4 * amdahl(0.025, 8)  # its own seconds at eight cores still outlast the area
    # a task whose key does not speed up stands as one at its widest does: no width moves its end
    no_speedup = Peer(2.9, 153.5, 1.0, 1, 8)
    assert allot([no_speedup, alignment, short], 128, 8, 1200.0)[0] == [1, 8, 1]


def test_peers_waiting_for_cores_keep_a_task_narrow_that_alone_would_start_wide():
    alone = Outlook(cores=8, domain_cores=8, free=8, backlog=0.0)
    assert choose_width(1, 8, 10.0, 0.0, 0.05, 3, alone).width == 8
    crowd = Outlook(cores=8, domain_cores=8, free=8, backlog=0.0, peers=(Peer(10.0, 0.0, 0.05, 1, 8),) * 15)
    assert choose_width(1, 8, 10.0, 0.0, 0.05, 3, crowd) == widths.WidthChoice(1, widths.MANY_WAITING, 20.0)


def test_a_long_task_of_a_key_never_seen_wider_is_planned_wide_where_no_gain_would_cost_little():
    """One 40 s task of an unsure key (fitted at no gain) and eight 5 s ones of a sure key on 16
    cores: allotted at no gain it is planned at one core, and would end the work at 40 s whatever
    width it starts on; were its key perfectly parallel, eight cores would end it at 5 s. At no gain
    eight cores cost the work nothing (the area, 320 + 40 core-seconds over 16 cores, 22.5 s, ends
    before its 40 s), so it is planned there and its cores are reserved."""
    long = Peer(40.0, 0.0, 1.0, 1, 8, False)
    peers = [long, *[Peer(5.0, 0.0, 1.0, 1, 8, True)] * 8]
    allotted, _, _ = allot(peers, 16, 8, 0.0)
    assert allotted[0] == 1
    assert widths.explore_allotted(peers, allotted, 16, 8, 0.0) == [8, *allotted[1:]]
    # sure of no gain: nothing to learn, it stays where it was allotted
    sure = [dataclasses.replace(long, sure=True), *peers[1:]]
    assert widths.explore_allotted(sure, allotted, 16, 8, 0.0) == allotted
    # where the cores it would hold cost the work's end more than EXPLORE_COST, it stays narrow
    busy = widths.explore_allotted(peers, allotted, 16, 8, 16 * 40.0)
    assert busy == allotted


def _no_gain_end(peers, chosen, cores, backlog):
    """The work's end at no gain, bounded below three ways: each peer's own end and chain, every
    core-second on the cores, and the peers' core-seconds on the cores followed by the shortest chain."""
    owns = [p.runtime * amdahl(p.serial, w) / amdahl(p.serial, p.low) for p, w in zip(peers, chosen)]
    area = sum(w * own for w, own in zip(chosen, owns))
    return max(max(own + p.tail for own, p in zip(owns, peers)), (backlog + area) / cores,
               area / cores + min(p.tail for p in peers))


@st.composite
def keyed_peers(draw):
    keys = draw(st.integers(1, 4))
    return [Peer(draw(st.floats(0.1, 100)), draw(st.floats(0, 50)), draw(st.sampled_from([0.05, 0.5, 1.0])), 1,
                 draw(st.sampled_from([1, 2, 4, 8])), draw(st.booleans()), key=draw(st.integers(0, keys - 1)))
            for _ in range(draw(st.integers(1, 30)))]


@settings(deadline=None)  # a timed example is a flaky test on a shared machine
@given(keyed_peers(), st.sampled_from([4, 8, 16, 64]), st.floats(0, 5e3), st.sets(st.integers(0, 3)))
def test_planned_exploration_costs_the_work_at_most_explore_cost_at_no_gain(peers, cores, backlog, busy):
    """Whatever it widens (hopes, key by key, capped; one task of a key one size up), the work's end
    with no gain at all moves by at most EXPLORE_COST; sure peers stay as allotted; an unsure peer
    is planned no narrower than allotted and within its range and the domain; of a key in ``busy``
    nothing goes beyond its hope."""
    domain = min(8, cores)
    allotted, _, _ = allot(peers, cores, domain, backlog)
    hoped, _, _ = allot([p if p.sure else dataclasses.replace(p, serial=0.0) for p in peers], cores, domain, backlog)
    planned = widths.explore_allotted(peers, allotted, cores, domain, backlog, busy=busy)
    assert (_no_gain_end(peers, planned, cores, backlog)
            <= _no_gain_end(peers, allotted, cores, backlog) * (1 + widths.EXPLORE_COST) * (1 + 1e-9))
    for peer, a, h, w in zip(peers, allotted, hoped, planned):
        if peer.sure:
            assert w == a
        else:
            assert a <= w <= max(a, min(peer.high, domain))
            if peer.key in busy:
                assert w <= max(a, h)


def test_while_many_wait_one_task_of_each_unsure_key_is_planned_one_size_up_the_cheapest_first():
    """48 tasks of three keys never seen wider on 8 cores of 4-core domains: were they perfectly
    parallel, each would still be allotted one core (the area binds), so no hope widens any, and
    with cores freeing one at a time none would ever start wider. One task of each key, its
    shortest, is planned at two cores, the cheapest key first, while no gain at all costs the work
    at most EXPLORE_COST: here the two short keys' (1 s and 2 s: 0.04% and 0.08% of a 313.5 s end),
    not the 60 s key's (2.4%). A key with enough explorations running (``busy``) is left alone."""
    peers = [Peer(runtime + i / 100, 0.0, 1.0, 1, 4, False, key=key)
             for key, runtime in (("a", 1.0), ("b", 2.0), ("c", 60.0)) for i in range(16)]
    allotted, _, _ = allot(peers, 8, 4, 1500.0)
    assert allotted == [1] * 48
    planned = widths.explore_allotted(peers, allotted, 8, 4, 1500.0)
    wider = [(peer.key, peer.runtime, width) for peer, width in zip(peers, planned) if width > 1]
    assert wider == [("a", 1.0, 2), ("b", 2.0, 2)]
    assert widths.explore_allotted(peers, allotted, 8, 4, 1500.0, busy={"a"}) == [
        2 if peer.key == "b" and peer.runtime == 2.0 else 1 for peer in peers]


def test_the_chain_after_a_batch_counts_in_what_its_exploration_costs_the_work():
    """Montage's reprojections: 48 tasks of one key never seen wider, 10 s each, on one 16-core
    domain. One of them one size up, at no gain, adds 10 core-seconds to 480: alone, 2.08% of the
    work's end, more than EXPLORE_COST, and the key was never explored, so no later run knew its
    speed-up (learned Montage on ``xeon16`` ended as low as 0.83x as soon as every task on two cores,
    docs/results/widths.md). The fits, the model and the mosaic wait for the last of them (a
    chain of 20 s at least): 0.6 s on an end of 50 s is 1.25%, and one is planned at two cores."""
    alone = [Peer(10.0, 0.0, 1.0, 1, 16, False, key="mProject")] * 48
    allotted, _, _ = allot(alone, 16, 16, 0.0)
    assert allotted == [1] * 48
    assert widths.explore_allotted(alone, allotted, 16, 16, 0.0) == allotted
    chained = [dataclasses.replace(peer, tail=20.0) for peer in alone]
    planned = widths.explore_allotted(chained, allotted, 16, 16, 0.0)
    assert sorted(planned) == [1] * 47 + [2]


def test_hopes_are_planned_key_by_key_and_a_dear_hope_a_size_narrower():
    """An hour-long task of an unsure key waits beside twelve unsure tasks of another key, on 16
    cores. All hopes together (the hour on 16 cores, the 600 s one of the twelve on 4) would cost
    the work 6.8% at no gain, the hour on 16 alone 3.6%: all or none, none was planned, and the
    hour started on whatever was free. Key by key, the twelve's hope is planned, and the hour a
    size narrower, on 8, where its end is the work's end still."""
    merge = Peer(3600.0, 0.0, 1.0, 1, 16, False, key="merge")
    others = [Peer(600.0 if i == 0 else 90.0, 70.0, 1.0, 1, 16, False, key="genotype") for i in range(12)]
    peers = [merge, *others]
    allotted, _, _ = allot(peers, 16, 16, 500.0)
    assert allotted == [1] * 13
    base = _no_gain_end(peers, allotted, 16, 500.0)
    assert _no_gain_end(peers, [16, 4, *allotted[2:]], 16, 500.0) > base * 1.06
    assert _no_gain_end(peers, [16, *allotted[1:]], 16, 500.0) > base * (1 + widths.EXPLORE_COST)
    assert widths.explore_allotted(peers, allotted, 16, 16, 500.0) == [8, 4, *allotted[2:]]


def test_planning_explores_no_wider_than_the_hope_and_leaves_sure_keys_as_allotted():
    """Three unsure tasks of one key and a sure one, on 16 cores: the unsure ones are planned at
    most at the widths a perfectly parallel key would be allotted, the sure one as allotted."""
    peers = [Peer(runtime, 0.0, 1.0, 1, 8, False) for runtime in (10.0, 30.0, 20.0)] + [Peer(25.0, 0.0, 0.5, 1, 8)]
    allotted, _, _ = allot(peers, 16, 8, 0.0)
    hoped, _, _ = allot([dataclasses.replace(p, serial=0.0) if not p.sure else p for p in peers], 16, 8, 0.0)
    explored = widths.explore_allotted(peers, allotted, 16, 8, 0.0)
    assert explored != allotted and explored[3] == allotted[3]
    assert all(a <= e <= max(a, h) for a, e, h in zip(allotted, explored, hoped))
