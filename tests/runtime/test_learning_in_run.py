"""Learning inside a run: the first measured task of a key tells the waiting ones their footprint,
and unmeasured tasks of one key are not started side by side while another app's work waits."""

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor

MiB = 2**20


@python_app(executors=["scalpel"])
def sweep(mib, seconds, seed, parsl_resource_specification={}):
    """Touch ``mib`` MiB over and over for ``seconds``: a footprint the probe can read."""
    import os
    import time

    data = bytearray(mib << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data[::4096] = bytes(len(data) // 4096)
    return {"seed": seed, "pid": os.getpid(), "t0": time.time()}


@python_app(executors=["scalpel"])
def small(x, parsl_resource_specification={}):
    import time

    time.sleep(0.2)
    return x


@pytest.mark.parametrize("node_manager", [True, False])
def test_waiting_tasks_of_a_key_take_the_footprint_measured_while_its_first_task_runs(tmp_path, node_manager):
    # An empty store: the lookups' footprint is the prior (0) until one is measured.
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=str(tmp_path / "profiles.sqlite"),
                               node_manager=node_manager)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        smalls = [small(i) for i in range(4)]
        lookups = [sweep(24, 1.0, seed, parsl_resource_specification={"profile_key": "lookup"}) for seed in range(3)]
        assert [f.result(timeout=120)["seed"] for f in lookups] == [0, 1, 2]
        assert [f.result(timeout=120) for f in smalls] == [0, 1, 2, 3]
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    rows = sorted((r for r in report["tasks"] if r["profile_key"] == "lookup"), key=lambda r: r["task_id"])
    assert all(r["footprint_source"] == "prior" for r in rows)
    # The later lookups were scheduled with what the first one measured while it ran, not the prior 0.
    # (The probe's first reading of a fresh worker's first task also sees its start-up: it reads high.)
    assert all(16 * MiB < r["scheduled_footprint"] < 64 * MiB for r in rows[1:]), rows
    # While the first lookup ran unmeasured, a small task went beside it instead of a second lookup.
    assert report["admission"].get("kept-apart", 0) >= 1, report["admission"]


@python_app(executors=["scalpel"])
def timed_sweep(mib, seconds, seed, parsl_resource_specification={}):
    """``sweep`` that also says when it ended (``time.time()`` at both ends)."""
    import time

    t0 = time.time()
    data = bytearray(mib << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data[::4096] = bytes(len(data) // 4096)
    return {"seed": seed, "t0": t0, "t1": time.time()}


@python_app(executors=["scalpel"])
def timed_small(x, parsl_resource_specification={}):
    import time

    t0 = time.time()
    time.sleep(0.3)
    return {"seed": x, "t0": t0, "t1": time.time()}


def test_a_first_run_keeps_its_large_tasks_apart_while_small_ones_wait(tmp_path):
    # An empty store: every run time is the prior's guess. Two large tasks (24 MiB: two of them
    # overflow a 32 MiB LLC in the model) submitted first, then ten small ones, more small work
    # than one large task lasts. Once the first large task is measured, the second does not start
    # beside it while small tasks wait: no start trusts a co-run foreseen on guessed run times.
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=str(tmp_path / "profiles.sqlite"))
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        larges = [timed_sweep(24, 1.0, seed, parsl_resource_specification={"profile_key": "large"}) for seed in range(2)]
        smalls = [timed_small(i) for i in range(10)]
        large_spans = [f.result(timeout=120) for f in larges]
        small_spans = [f.result(timeout=120) for f in smalls]
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    first, second = sorted(large_spans, key=lambda span: span["t0"])
    last_small_start = max(span["t0"] for span in small_spans)
    # The second large task started after the first ended, or once no small task was left to start.
    assert second["t0"] >= first["t1"] or second["t0"] >= last_small_start, (large_spans, small_spans)
    rows = [r for r in report["tasks"] if r["profile_key"] == "large"]
    assert all(r["admission"] not in ("co-run: foreseen by the plan", "co-run: waiting costs more") for r in rows), rows
