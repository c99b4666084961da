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
