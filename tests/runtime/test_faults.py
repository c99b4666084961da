"""Systematic fault injection (scalpel_executor.stress.faults): every task ends exactly once.

Each run covers every (state, fault) combination the harness knows once, in an order and with
timings drawn from a fresh seed, printed on failure (``SCALPEL_FAULT_SEED`` fixes it). The long run
is ``python benchmarks/faults.py --cases 600``; its figures are in docs/reliability.md.
"""

import os
import random

from scalpel_executor.stress import faults


def test_every_fault_in_every_state_ends_each_task_exactly_once_and_leaves_nothing():
    seed = int(os.environ.get("SCALPEL_FAULT_SEED") or random.randrange(1, 10**6))
    report = faults.run(cases=len(faults.COMBINATIONS), seed=seed, per_round=9)
    assert set(report.combinations) == set(faults.COMBINATIONS)
    assert report.failures == [], f"seed {seed} (rerun with SCALPEL_FAULT_SEED={seed}):\n" + "\n".join(report.failures)
    assert report.lost == report.doubled == report.leftovers == 0
    # The faults did happen: the typed errors they cause were seen.
    assert {"TaskExit", "WorkerDied", "TypeError", "UnreadableError", "WalltimeExceeded"} <= set(report.outcomes)


def test_the_plan_covers_every_combination_before_repeating_and_replays_from_its_seed():
    planned = faults.plan(len(faults.COMBINATIONS) + 5, seed=3)
    first = [(c.state, c.fault) for c in planned[:len(faults.COMBINATIONS)]]
    assert sorted(first) == sorted(faults.COMBINATIONS)
    assert [str(c) for c in faults.plan(10, seed=3)] == [str(c) for c in planned[:10]]
    assert "--replay" in str(planned[0])
