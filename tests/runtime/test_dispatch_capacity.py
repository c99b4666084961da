"""The dispatch-capacity harness (scalpel_executor.stress.dispatch_capacity): a real ManagerHub, fake managers.

Behaviour only (every task once, every manager used, the table's fields present); the figures
themselves are in docs/results/dispatch-capacity.md. No assertion on time.
"""

import resource

import psutil
import pytest

from scalpel_executor.stress import dispatch_capacity


def test_every_task_completes_once_and_every_fake_manager_answers_some():
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    # Three managers over two processes: one process serves two of them, as it serves 64 in the benchmark.
    samples = dispatch_capacity.run([3], tasks=200, slots=1, prefetch=1, warmup=20, rounds=1, fake_processes=2,
                                    idle=0.2)

    (sample,) = samples
    assert sample["fake_processes"] == 2
    assert sample["completed"] == sample["distinct"] == 200
    assert sample["failed"] == 0
    assert sorted(sample["received"]) == ["0", "1", "2"]
    assert all(received > 0 for received in sample["received"].values())
    assert sum(sample["received"].values()) == 220  # the warm-up's 20 and the 200, each sent once
    assert sample["idle_s"] >= 0.2 and sample["idle_driver_cpu_pct"] >= sample["idle_hub_thread_cpu_pct"] >= 0
    (row,) = dispatch_capacity.summarize(samples)
    assert set(dispatch_capacity.TABLE_FIELDS) <= set(row)
    assert row["managers"] == 3 and row["samples"] == 1
    assert row["tasks_per_s_min"] <= row["tasks_per_s"] <= row["tasks_per_s_max"]
    assert "tasks/s" in dispatch_capacity.table([row])
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before  # the fakes exited


def test_the_open_file_limit_is_raised_for_many_managers_and_a_low_hard_limit_is_named(monkeypatch):
    calls = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 8192))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: calls.append(limits))
    assert dispatch_capacity.raise_file_limit(64) == 1024  # enough already: left alone
    assert calls == []
    needed = 1024 * dispatch_capacity.FILES_PER_MANAGER + dispatch_capacity.FILES_SPARE
    assert dispatch_capacity.raise_file_limit(1024) == needed
    assert calls == [(needed, 8192)]  # the soft limit only
    with pytest.raises(RuntimeError, match=r"need about 16640 open files and the hard limit is 8192; raise it"):
        dispatch_capacity.raise_file_limit(4096)
