"""Node managers and their workers log into the run directory, as HTEX's do:
``<run_dir>/<label>/block-<id>/<host>-<manager pid>/manager.log`` and ``worker-<rank>.log``, in
local mode (block 0) and in provider mode (a LocalProvider block's manager, told by its launch
command); a directory the node cannot write sends them to a node-local one."""

import os
import socket
from pathlib import Path

import parsl
import pytest
from parsl import python_app
from parsl.config import Config
from parsl.providers import LocalProvider

from scalpel_executor import ScalpelExecutor
from scalpel_executor.runtime.logs import node_log_dir


@python_app(executors=["scalpel"])
def manager_and_rank():
    import os

    return os.getppid(), os.environ["PARSL_WORKER_RANK"]


@pytest.mark.parametrize("mode", ["local", "provider"])
def test_manager_and_worker_logs_are_in_the_run_directory(tmp_path, mode):
    options = {"provider": LocalProvider(init_blocks=1, min_blocks=0, max_blocks=1)} if mode == "provider" else {}
    executor = ScalpelExecutor(label="scalpel", profiles=False, topology=[[min(os.sched_getaffinity(0))]], **options)
    with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run"), strategy_period=0.5)):
        manager_pid, rank = manager_and_rank().result(timeout=120)
        run_dir = Path(executor.run_dir)
    node = run_dir / "scalpel" / "block-0" / f"{socket.gethostname()}-{manager_pid}"
    manager_log = (node / "manager.log").read_text()
    assert f"node manager pid {manager_pid} started on {socket.gethostname()} (block 0" in manager_log
    if mode == "local":  # a provider block is cancelled at cleanup (SIGTERM) before the executor shuts down
        assert f"node manager pid {manager_pid} ending (exit status 0)" in manager_log
    worker_log = (node / f"worker-{rank}.log").read_text()
    assert f"(rank {rank} of 1) started on CPUs" in worker_log
    assert f"for pid {manager_pid}" in worker_log
    assert [path.name for path in (run_dir / "scalpel").glob("block-*")] == ["block-0"]

def test_a_directory_the_node_cannot_make_falls_back_to_a_node_local_one(tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    directory, problem = node_log_dir(str(blocked / "run" / "scalpel"), "3", "node7", 42)
    assert directory.endswith(os.path.join(str(blocked / "run" / "scalpel").lstrip(os.sep), "block-3", "node7-42"))
    assert os.path.isdir(directory) and os.access(directory, os.W_OK)
    assert problem.startswith(f"{blocked / 'run' / 'scalpel' / 'block-3' / 'node7-42'} cannot be made")
    wanted, none = node_log_dir(str(tmp_path / "run" / "scalpel"), "", "node7", 42)
    assert (wanted, none) == (str(tmp_path / "run" / "scalpel" / "block-0" / "node7-42"), None)
