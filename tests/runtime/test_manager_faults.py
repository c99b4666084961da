"""Fault injection at node managers (scalpel_executor.stress.manager_faults): a quick pass.

A few (mode, state, fault) combinations, one round per mode, with timings drawn from a fresh seed
printed on failure (``SCALPEL_FAULT_SEED`` fixes it). The long run is
``python benchmarks/manager_faults.py --mode provider --cases 500 --seed 7`` (in two parts side by side,
``--part 1/2`` and ``--part 2/2``); its figures are in docs/reliability.md.
"""

import os
import random

from scalpel_executor.stress import manager_faults

QUICK = [  # one of each defect of issue 26 the harness reaches, and local mode's losses
    ("provider", "busy", "no_workers"),  # a manager whose workers cannot start is dealt nothing
    ("provider", "stalled", "slow_callback"),  # a stalled driver and a slow callback lose no result
    ("provider", "idle", "malformed_keyed"),  # a malformed message costs only its sender
    ("provider", "registering", "oversized_stranger"),  # a stranger's huge frame is not allocated
    ("local", "busy", "sigkill"),
    ("local", "replacing", "sigkill"),
]


def test_a_few_manager_faults_end_each_task_once_discard_no_result_and_leave_nothing():
    seed = int(os.environ.get("SCALPEL_FAULT_SEED") or random.randrange(1, 10**6))
    planned = [manager_faults.Case(number, state, fault, seed * 1_000_003 + number, mode)
               for number, (mode, state, fault) in enumerate(QUICK)]
    report = manager_faults.run(planned=planned, per_round=len(QUICK))
    assert report.failures == [], f"seed {seed} (rerun with SCALPEL_FAULT_SEED={seed}):\n" + "\n".join(report.failures)
    assert report.cases == len(QUICK) and report.rounds == 2
    assert report.lost == report.doubled == report.discarded == report.leftovers == report.dealt_to_unable == 0
    assert report.outcomes["NodeManagerLost"] >= 1  # the kills did cost the tasks running there


def test_the_plan_covers_every_combination_before_repeating_and_replays_from_its_seed():
    planned = manager_faults.plan(len(manager_faults.COMBINATIONS) + 5, seed=3)
    first = [(c.mode, c.state, c.fault) for c in planned[:len(manager_faults.COMBINATIONS)]]
    assert sorted(first) == sorted(manager_faults.COMBINATIONS)
    assert [str(c) for c in manager_faults.plan(10, seed=3)] == [str(c) for c in planned[:10]]
    assert "--replay provider/" in str(manager_faults.plan(80, seed=3, modes=("provider",))[-1])
    assert {c.mode for c in manager_faults.plan(30, seed=3, modes=("local",))} == {"local"}
