"""A run with Parsl monitoring writes a real monitoring database, with resource rows from workers,
node rows from node managers and block rows, in local mode (the node manager, block "0") and in
provider mode (a LocalProvider block's manager)."""

import queue
import socket
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from parsl.jobs.states import JobState

SCRIPT = textwrap.dedent(
    """
    import sys
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from parsl.monitoring import MonitoringHub
    from parsl.providers import LocalProvider
    from scalpel_executor import ScalpelExecutor

    @python_app
    def busy(seconds):
        import time
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return seconds

    if __name__ == "__main__":  # monitoring starts its database process with spawn
        run_dir, db, mode = sys.argv[1], sys.argv[2], sys.argv[3]
        options = {"provider": LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1)} if mode == "provider" else {}
        config = Config(
            executors=[ScalpelExecutor(label="scalpel", **options)],
            run_dir=run_dir,
            monitoring=MonitoringHub(logging_endpoint="sqlite:///" + db, resource_monitoring_interval=0.2),
        )
        with parsl.load(config):
            assert [f.result() for f in [busy(0.8) for _ in range(3)]] == [0.8] * 3
    """
)


@pytest.mark.parametrize("mode", ["local", "provider"])
def test_monitoring_database_has_tasks_tries_and_resources(tmp_path, mode):
    db = tmp_path / "monitoring.db"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo"), str(db), mode],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    with sqlite3.connect(db) as connection:
        count = lambda table: connection.execute(f"select count(*) from {table}").fetchone()[0]  # noqa: E731
        assert count("workflow") == 1
        assert count("task") == 3
        assert count("try") == 3
        assert count("resource") >= 1
        executors = {row[0] for row in connection.execute("select task_executor from try")}
        assert executors == {"scalpel"}
        connection.row_factory = sqlite3.Row
        nodes = [dict(row) for row in connection.execute("select * from node order by timestamp")]
        blocks = [dict(row) for row in connection.execute("select * from block order by timestamp")]
    run_id = nodes[0]["run_id"]
    # One manager: a row when it was seen (active, its workers), one when the run ended (inactive).
    assert len({node["uid"] for node in nodes}) == 1
    assert [node["active"] for node in nodes][0] == 1 and nodes[-1]["active"] == 0
    for node in nodes:
        assert node["hostname"] == socket.gethostname() and node["uid"].startswith(socket.gethostname() + "-")
        assert node["block_id"] == "0" and node["run_id"] == run_id
        assert node["cpu_count"] >= 1 and node["worker_count"] >= 1 and node["total_memory"] > 0
        assert node["python_v"].count(".") == 2 and node["last_heartbeat"] and node["timestamp"]
    assert {block["block_id"] for block in blocks} == {"0"}
    assert {block["executor_label"] for block in blocks} == {"scalpel"}
    assert {block["run_id"] for block in blocks} == {run_id}
    statuses = [block["status"] for block in blocks]
    # Provider mode's rows are Parsl's, from its poll of the provider: PENDING at submit, later states
    # as its polls see them (LocalProvider polls every 5 s, so a short run may end before RUNNING).
    assert statuses and set(statuses) <= {state.name for state in JobState}
    if mode == "local":  # the node manager is the block; its job id is the manager's pid
        assert statuses == ["RUNNING", "COMPLETED"]
        assert {block["job_id"] for block in blocks} == {nodes[0]["uid"].rsplit("-", 1)[1]}


def test_node_monitor_writes_a_row_per_change_and_marks_every_manager_inactive_at_the_end():
    from parsl.monitoring.message_type import MessageType

    from scalpel_executor.runtime.driver.monitoring import NodeMonitor

    def manager(pid, workers, active=True):
        return {"block_id": "1", "hostname": "node7", "pid": pid, "cpus": [0, 1, 2, 3], "worker_count": workers,
                "active": active, "memory": 2**30}

    messages, now = queue.Queue(), []
    monitor = NodeMonitor(messages, "run", "scalpel", lambda: now, local=False)

    def rows():
        found = []
        while not messages.empty():
            kind, row = messages.get()
            assert kind == MessageType.NODE_INFO  # provider mode: block rows are Parsl's
            found.append((row["uid"], row["active"], row["worker_count"]))
        return found

    now[:] = [manager(11, 0)]  # registered, its workers not started: not a node yet
    monitor.look()
    assert rows() == []
    now[:] = [manager(11, 4), manager(12, 4)]
    monitor.look()
    monitor.look()  # nothing changed: nothing written
    assert rows() == [("node7-11", True, 4), ("node7-12", True, 4)]
    now[:] = [manager(11, 3), manager(12, 4, active=False)]  # a core retired; a manager drains
    monitor.look()
    assert rows() == [("node7-11", True, 3), ("node7-12", False, 4)]
    now[:] = [manager(11, 3)]  # the drained one released
    monitor.look()
    assert rows() == []  # already said inactive
    monitor.stop()
    assert rows() == [("node7-11", False, 3)]
