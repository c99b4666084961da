"""ScalpelExecutor(provider=SlurmProvider(...)) on a real Slurm cluster: node managers in Slurm blocks.

Needs a cluster (see slurm_cluster.py); without one these tests are skipped with the command that
starts one.
"""

import os
import time

import parsl
import pytest
from parsl.app.app import python_app
from parsl.config import Config
from parsl.executors.errors import BadStateException
from parsl.jobs.states import JobState

from scalpel_executor import Batching, ScalpelExecutor
from tests.integration.slurm_cluster import queued_jobs, slurm_provider, wait_for_jobs_to_leave

pytestmark = pytest.mark.slurm

GENEROUS = 180.0


@python_app(executors=["scalpel_slurm"])
def square_where(number):
    import os

    return number * number, os.environ.get("SLURM_JOB_ID"), sorted(os.sched_getaffinity(0))


def load(tmp_path, provider, **options):
    executor = ScalpelExecutor(label="scalpel_slurm", provider=provider, profiles=False, batching=Batching(window=0.002),
                               heartbeat_period=1.0, **options)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy_period=0.5))
    return dfk, executor


def test_scalpel_runs_apps_on_pinned_workers_in_a_slurm_block_and_cancels_it_at_cleanup(slurm_cluster, tmp_path):
    dfk, executor = load(tmp_path, slurm_provider(slurm_cluster))
    try:
        results = [future.result(timeout=GENEROUS) for future in [square_where(n) for n in range(8)]]
        blocks = dict(executor.blocks_to_job_id)
        (manager,) = executor.connected_managers()
    finally:
        dfk.cleanup()
    assert [square for square, _, _ in results] == [n * n for n in range(8)]
    assert len(blocks) == 1, f"max_blocks=1, yet the executor submitted {blocks}"
    (job_id,) = blocks.values()
    assert {job for _, job, _ in results} == {str(job_id)}, "a task ran outside the Slurm block"
    assert manager["block_id"] == "0" and manager["worker_count"] >= 1
    slots = {tuple(cpus) for cpus in manager["slot_cpus"]}
    assert all(len(cpus) == 1 and tuple(cpus) in slots for _, _, cpus in results), "a task ran unpinned"
    assert wait_for_jobs_to_leave([job_id]) == set(), f"job {job_id} still queued after dfk.cleanup()"


def test_a_block_in_a_partition_that_does_not_exist_fails_the_tasks(slurm_cluster, tmp_path):
    before = queued_jobs()
    dfk, executor = load(tmp_path, slurm_provider(slurm_cluster, partition="no-such-partition"))
    try:
        with pytest.raises(BadStateException, match="no-such-partition|partition|Invalid"):
            square_where(1).result(timeout=GENEROUS)
    finally:
        dfk.cleanup()
    assert queued_jobs() - before == set()


def test_shutdown_while_a_block_is_pending_cancels_it(slurm_cluster, tmp_path):
    cpus = len(os.sched_getaffinity(0))
    # Two blocks that each want every CPU: the second pends while the first runs.
    dfk, executor = load(tmp_path, slurm_provider(slurm_cluster, init_blocks=2, max_blocks=2, cores_per_node=cpus))
    try:
        deadline = time.monotonic() + GENEROUS
        while time.monotonic() < deadline:
            states = [status.state for status in executor.status().values()]
            if JobState.PENDING in states and JobState.RUNNING in states:
                break
            time.sleep(0.5)
        assert JobState.PENDING in states, f"no block pending: {executor.status()}"
        job_ids = list(executor.blocks_to_job_id.values())
    finally:
        dfk.cleanup()
    assert wait_for_jobs_to_leave(job_ids) == set(), f"jobs {job_ids} still queued after dfk.cleanup()"
