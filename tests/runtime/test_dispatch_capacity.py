"""The dispatch-capacity harness (scalpel_executor.experiments.dispatch_capacity): a real ManagerHub, fake managers.

Behaviour only (every task once, every manager used, the table's fields present); the figures
themselves are in docs/benchmarks.md. No assertion on time.
"""

import psutil

from scalpel_executor.experiments import dispatch_capacity


def test_every_task_completes_once_and_every_fake_manager_answers_some():
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    # Three managers over two processes: one process serves two of them, as it serves 64 in the benchmark.
    samples = dispatch_capacity.run([3], tasks=200, slots=1, prefetch=1, warmup=20, rounds=1, fake_processes=2)

    (sample,) = samples
    assert sample["fake_processes"] == 2
    assert sample["completed"] == sample["distinct"] == 200
    assert sample["failed"] == 0
    assert sorted(sample["received"]) == ["0", "1", "2"]
    assert all(received > 0 for received in sample["received"].values())
    assert sum(sample["received"].values()) == 220  # the warm-up's 20 and the 200, each sent once
    (row,) = dispatch_capacity.summarize(samples)
    assert set(dispatch_capacity.TABLE_FIELDS) <= set(row)
    assert row["managers"] == 3 and row["samples"] == 1
    assert row["tasks_per_s_min"] <= row["tasks_per_s"] <= row["tasks_per_s_max"]
    assert "tasks/s" in dispatch_capacity.table([row])
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before  # the fakes exited
