"""A run with Parsl monitoring writes a real monitoring database, with resource rows from workers,
in local mode (the node manager) and in provider mode (a LocalProvider block's manager)."""

import sqlite3
import subprocess
import sys
import textwrap

import pytest

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
