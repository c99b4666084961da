"""Parsl workflows on a real Slurm cluster: blocks submitted with SlurmProvider, results back, blocks cancelled.

Needs a cluster (see slurm_cluster.py); without one these tests are skipped with the command that
starts one.
"""

import parsl
import pytest
from parsl.app.app import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor

from tests.integration.slurm_cluster import slurm_provider, wait_for_jobs_to_leave

pytestmark = pytest.mark.slurm


@python_app
def square_in_job(number):
    import os

    return number * number, os.environ.get("SLURM_JOB_ID")


def test_htex_runs_apps_in_a_slurm_block_and_cancels_it_at_cleanup(slurm_cluster, tmp_path):
    executor = HighThroughputExecutor(
        label="htex_slurm",
        provider=slurm_provider(slurm_cluster),
        max_workers_per_node=2,
    )
    # Parsl's log and the block's submit script, output and worker logs stay under tmp_path.
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy_period=0.5))
    try:
        futures = [square_in_job(number) for number in range(6)]
        results = [future.result(timeout=180) for future in futures]
        blocks = dict(executor.blocks_to_job_id)
    finally:
        dfk.cleanup()

    assert [square for square, _ in results] == [n * n for n in range(6)]
    assert len(blocks) == 1, f"max_blocks=1, yet the executor submitted {blocks}"
    (job_id,) = blocks.values()
    assert {job for _, job in results} == {job_id}, "a task ran outside the Slurm block"
    assert wait_for_jobs_to_leave([job_id]) == set(), f"job {job_id} still queued after dfk.cleanup()"
